"""The messaging services' arguments as callers give them, parsed.

Each surface passes what it was given (a JSON field, a tool argument, a path segment)
and the service or selector parses it here, first, so no surface can skip a check and
every surface answers a bad value with the same error.
"""

from __future__ import annotations

import uuid

from aimemory_site.lib.durations import expiry_in_range, expiry_range_text
from aimemory_site.lib.errors import BadRequest, Code
from aimemory_site.lib.limits import whole_number
from messaging.limits import RETRY_ID_MAX_CHARS


def message_id_parse(value: str | None) -> uuid.UUID | None:
    """Parse an optional message id, or raise BadRequest: ids are full UUIDs."""
    return _uuid_parse(value, "message_id", Code.INVALID_MESSAGE_ID)


def message_id_required(value: str) -> uuid.UUID:
    """Parse a message id that must be there (a path segment, a required argument)."""
    parsed = message_id_parse(value)
    assert parsed is not None
    return parsed


def in_reply_to_parse(value: str | None) -> uuid.UUID | None:
    """Parse an optional ``in_reply_to``: a full message id, or 400 invalid_in_reply_to."""
    return _uuid_parse(value, "in_reply_to", Code.INVALID_IN_REPLY_TO)


def _uuid_parse(value: str | None, name: str, code: str) -> uuid.UUID | None:
    if value is None:
        return None
    try:
        return uuid.UUID(value.strip())
    except ValueError:
        raise BadRequest(f"{name} must be a full UUID, got {value[:60]!r}", code=code) from None


def idempotency_key_parse(value: str | None) -> str | None:
    """An optional retry key: 1-200 characters (docs/reference.md#status-replies-and-retries)."""
    return _retry_id_parse(value, "idempotency_key", Code.INVALID_IDEMPOTENCY_KEY)


def request_id_parse(value: str | None) -> str | None:
    """An optional pop request id: 1-200 characters (docs/reference.md#status-replies-and-retries)."""
    return _retry_id_parse(value, "request_id", Code.INVALID_REQUEST_ID)


def _retry_id_parse(value: str | None, name: str, code: str) -> str | None:
    if value is None:
        return None
    if not 1 <= len(value) <= RETRY_ID_MAX_CHARS:
        raise BadRequest(f"{name} must be 1-{RETRY_ID_MAX_CHARS} characters", code=code)
    return value


def expires_in_parse(value: object) -> int | None:
    """An optional ``expires_in_seconds``: a whole number of seconds in 60..2,592,000
    (docs/reference.md#messages), or 400 invalid_expiry (a boolean too: it is no count)."""
    if value is None:
        return None
    seconds = whole_number(value)
    if seconds is None or not expiry_in_range(seconds):
        raise BadRequest(
            f"expires_in_seconds must be a whole number of seconds, {expiry_range_text()}; "
            f"got {str(value)[:40]}",
            code=Code.INVALID_EXPIRY,
        )
    return seconds
