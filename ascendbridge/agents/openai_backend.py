"""Any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, Ollama, ...) as a backend.

A chat model cannot edit files itself, so the prompt asks for one JSON object
`{"summary": "...", "files": {"<path relative to the adaptation>": "<full new content>"}}`;
this backend writes those files into the workspace copy, refusing any path that would land
outside it (the refusal is reported, and the sandbox then rejects the whole run).

Configuration: ASCENDBRIDGE_OPENAI_BASE_URL (the `agent` section of ascendbridge.settings) or
OPENAI_BASE_URL (default https://api.openai.com/v1), ASCENDBRIDGE_OPENAI_MODEL or OPENAI_MODEL
(required), and from the environment the credential ASCENDBRIDGE_OPENAI_API_KEY or OPENAI_API_KEY
(optional for local servers).
"""

from __future__ import annotations

import json
import os
from typing import Any

import httpx

from ascendbridge.agents.backend import BackendReply, BackendRequest, json_object_in, register_backend
from ascendbridge.agents.sandbox import write_inside
from ascendbridge.agents.settings import AgentConfig
from ascendbridge.settings import section

DEFAULT_BASE_URL = "https://api.openai.com/v1"
REPLY_FORMAT = (
    'Answer with one JSON object and nothing else: {"summary": "<one line: what you changed and why>", '
    '"files": {"<path relative to the adaptation directory>": "<the full new content of that file>"}}. '
    'Use an empty "files" object when you have no fix.'
)


def _env(*names: str) -> str | None:
    for name in names:
        if os.environ.get(name):
            return os.environ[name]
    return None


class OpenAIBackend:
    name = "openai"

    def run(self, request: BackendRequest) -> BackendReply:
        config = section(AgentConfig)
        base = (config.openai_base_url or _env("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        model = config.openai_model or _env("OPENAI_MODEL")
        if not model:
            return BackendReply(None, False, "", error="no model: set ASCENDBRIDGE_OPENAI_MODEL (or OPENAI_MODEL)")
        key = _env("ASCENDBRIDGE_OPENAI_API_KEY", "OPENAI_API_KEY")  # a credential: not in settings
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        body = {
            "model": model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": f"{request.role_contract}\n\n{REPLY_FORMAT}"},
                {"role": "user", "content": request.prompt},
            ],
        }
        try:
            response = httpx.post(
                f"{base}/chat/completions", json=body, headers=headers, timeout=httpx.Timeout(request.timeout_s)
            )
        except httpx.TimeoutException:
            return BackendReply(None, True, "", error=f"no answer from {base} within {request.timeout_s:.0f} s")
        except httpx.HTTPError as exc:
            return BackendReply(None, False, "", error=f"cannot reach {base}: {exc}")
        if response.status_code != 200:
            return BackendReply(
                response.status_code, False, response.text[:2000], error=f"{base} answered HTTP {response.status_code}"
            )
        try:
            data: dict[str, Any] = response.json()
            content = str(data["choices"][0]["message"]["content"] or "")
        except (ValueError, KeyError, IndexError, TypeError):
            return BackendReply(0, False, response.text[:2000], error="the reply is not a chat completion")
        usage = data.get("usage") or {}
        tokens = (
            usage.get("total_tokens")
            or (int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0))
            or None
        )
        answer = json_object_in(content)
        if answer is None or not isinstance(answer.get("files", {}), dict):
            return BackendReply(0, False, content, tokens, error="the answer has no JSON object with a 'files' mapping")
        refused = []
        for path, text in answer.get("files", {}).items():
            data_text = text if isinstance(text, str) else json.dumps(text, indent=2, sort_keys=True) + "\n"
            if not write_inside(request.workspace, str(path), data_text):
                refused.append(str(path))
        return BackendReply(0, False, str(answer.get("summary") or content), tokens, refused_paths=refused)


register_backend("openai", OpenAIBackend)
