"""Moments as every JSON answer writes them: RFC 3339 in UTC, with a ``Z``."""

from __future__ import annotations

from datetime import datetime
from typing import overload


@overload
def rfc3339(value: datetime) -> str: ...
@overload
def rfc3339(value: datetime | None) -> str | None: ...
def rfc3339(value: datetime | None) -> str | None:
    """``2026-07-28T09:30:00.123456Z`` for an aware UTC ``value`` (None stays None).

    Django stores and returns UTC when ``USE_TZ`` is on, so the offset is always
    ``+00:00``; a client then reads one spelling of it on every surface.
    """
    return value.isoformat().replace("+00:00", "Z") if value is not None else None
