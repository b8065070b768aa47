"""Model id validation and adaptation directory names.

Model ids end up in paths, log file names, shell command lines and HTML, so they are checked
once, here, against a strict whitelist instead of being escaped everywhere.
"""

from __future__ import annotations

import hashlib
import re

MAX_MODEL_ID_LENGTH = 128
_SEGMENT = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_MODEL_ID_RE = re.compile(rf"^{_SEGMENT}(/{_SEGMENT})?$")
_UNSAFE_NAME_CHARS = re.compile(r"[^a-z0-9._-]+")


class InvalidModelIdError(ValueError):
    """A model id that cannot be used safely."""


def validate_model_id(model_id: str) -> str:
    """Return the id unchanged, or raise with a one-line reason."""
    if model_id is None or not model_id.strip():
        raise InvalidModelIdError("model id is empty")
    if len(model_id) > MAX_MODEL_ID_LENGTH:
        raise InvalidModelIdError(f"model id is {len(model_id)} characters long (at most {MAX_MODEL_ID_LENGTH})")
    if model_id.startswith("/") or model_id.startswith("~"):
        raise InvalidModelIdError(f"model id '{model_id}' is an absolute path; use --path for local models")
    if ".." in model_id.split("/") or ".." in model_id:
        raise InvalidModelIdError(f"model id '{model_id}' contains '..'")
    if not _MODEL_ID_RE.match(model_id):
        raise InvalidModelIdError(
            f"model id '{model_id}' has characters outside [A-Za-z0-9._-] (one '/' allowed, as in 'org/name')"
        )
    return model_id


def base_adaptation_name(model_id: str) -> str:
    """Lower-case, filesystem- and shell-safe name: 'Org/Model.v2' -> 'org__model.v2'."""
    validate_model_id(model_id)
    name = model_id.lower().replace("/", "__")
    name = _UNSAFE_NAME_CHARS.sub("-", name).strip(".-")
    return name or "model"


def hashed_adaptation_name(model_id: str) -> str:
    """The collision-free variant: the base name plus a short stable hash of the exact id."""
    digest = hashlib.sha256(model_id.encode("utf-8")).hexdigest()[:8]
    return f"{base_adaptation_name(model_id)}-{digest}"
