"""The optional TOML file named by ``AI_MEMORY_CONFIG`` (``[sanitize]``, webhooks)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured


def config_where(path: str) -> str:
    """How errors name the file, so an operator knows which one to fix."""
    return f"AI_MEMORY_CONFIG ({path})"


def config_document(path: str) -> dict[str, Any]:
    """The parsed TOML file at ``path``; an unreadable or invalid file is an error."""
    try:
        with Path(path).open("rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        raise ImproperlyConfigured(f"{config_where(path)}: cannot read the file: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ImproperlyConfigured(f"{config_where(path)}: not valid TOML: {exc}") from exc
