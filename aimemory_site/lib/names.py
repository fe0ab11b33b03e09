"""The one rule for workspace and project names (docs/architecture.md#data-model).

Django-free: the CLI checks names with it before it calls the server.
"""

from __future__ import annotations

import re

NAME_MAX_CHARS = 100
# 1-100 of letters, digits, ".", "_" and "-", not starting with a dot.
NAME_PATTERN = r"^(?!\.)[A-Za-z0-9._-]{1,100}$"
NAME_RULE = "use 1-100 characters of letters, digits, '.', '_' or '-', not starting with a dot"

_NAME_RE = re.compile(NAME_PATTERN)
_INVALID_NAME_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


def name_is_valid(value: str) -> bool:
    return _NAME_RE.fullmatch(value) is not None


def name_invalid_message(kind: str, value: str) -> str:
    """The error text for an invalid ``kind`` ("workspace", "project") name."""
    return f"invalid {kind} name {value[:120]!r}: {NAME_RULE}"


def name_from_directory(directory_name: str) -> str:
    """A valid name made from a directory's name (invalid runs become "-"), or ""."""
    return _INVALID_NAME_CHARS.sub("-", directory_name).lstrip(".")[:NAME_MAX_CHARS]
