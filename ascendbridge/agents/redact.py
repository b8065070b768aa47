"""Secret redaction for everything an agent sees or leaves behind (prompts, replies, logs).

Prompts leave this machine (an LLM endpoint), so they get a stricter filter than logs: known
token shapes (Hugging Face, OpenAI/Anthropic, GitHub, GitLab, Slack, AWS, JWT), credentials in
URLs and key=value pairs, the value of every secret-looking environment variable, and any long
mixed-case alphanumeric run that looks like a generated token. Lower-case hex (sha256 digests,
commit ids) is left alone because prompts legitimately quote it.
"""

from __future__ import annotations

import os
import re

MASK = "[REDACTED]"
_SECRET_ENV_HINTS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")
_MIN_ENV_SECRET = 8

_KNOWN: tuple[re.Pattern[str], ...] = (
    re.compile(r"hf_[A-Za-z0-9]{20,}"),
    re.compile(r"sk-(?:ant-)?[A-Za-z0-9_\-]{16,}"),
    re.compile(r"(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"),
    re.compile(r"glpat-[A-Za-z0-9_\-]{16,}"),
    re.compile(r"xox[abposr]-[A-Za-z0-9\-]{10,}"),
    re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),
    re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
)
# (prefix kept, secret masked)
_KEYED: tuple[re.Pattern[str], ...] = (
    re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?(?:bearer|token|basic)\s+)[^\s\"',]+"),
    re.compile(r"(?i)(\b[\w.\-]*(?:token|api[_-]?key|secret|password|passwd)[\"']?\s*[:=]\s*[\"']?)[^\s&'\",}]+"),
    re.compile(r"(://[^/\s:@]+:)[^@\s/]+(@)"),
)
# A generated-looking token: 32+ characters with upper case, lower case and digits mixed.
_LONG_RUN = re.compile(r"[A-Za-z0-9_\-+=]{32,}")


def _looks_generated(run: str) -> bool:
    return any(c.isupper() for c in run) and any(c.islower() for c in run) and any(c.isdigit() for c in run)


def env_secrets() -> list[str]:
    """Values of secret-looking environment variables, longest first (so substrings go last)."""
    values = {
        value
        for name, value in os.environ.items()
        if any(hint in name.upper() for hint in _SECRET_ENV_HINTS) and len(value) >= _MIN_ENV_SECRET
    }
    return sorted(values, key=len, reverse=True)


def redact(text: str) -> str:
    """`text` with every secret it could recognise replaced by [REDACTED]."""
    for value in env_secrets():
        text = text.replace(value, MASK)
    for pattern in _KNOWN:
        text = pattern.sub(MASK, text)
    for pattern in _KEYED:
        text = pattern.sub(lambda m: m.group(1) + MASK + (m.group(2) if m.re.groups > 1 else ""), text)
    return _LONG_RUN.sub(lambda m: MASK if _looks_generated(m.group(0)) else m.group(0), text)


def redact_value(value: object) -> object:
    """Redact every string inside a JSON-like value (dicts, lists) for prompt contexts."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(v) for v in value]
    return value
