"""The limits of messages (docs/reference.md#messages), in one place."""

from __future__ import annotations

from datetime import timedelta

from aimemory_site.lib.limits import MESSAGE_BODY_MAX_CHARS, MESSAGE_SUBJECT_MAX_CHARS

# A full inbox refuses further sends (409 inbox_full) until its agents pop some.
MAX_PENDING_PER_INBOX = 256
BODY_MAX_CHARS = MESSAGE_BODY_MAX_CHARS
SUBJECT_MAX_CHARS = MESSAGE_SUBJECT_MAX_CHARS
# Send keys and pop request ids (docs/reference.md#status-replies-and-retries): how long a retry is recognised.
RETRY_ID_MAX_CHARS = 200
RETRY_WINDOW = timedelta(hours=24)
