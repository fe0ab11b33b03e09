"""The limits of messages (DESIGN.md section 5), in one place."""

from __future__ import annotations

from datetime import timedelta

from aimemory_site.lib.limits import MESSAGE_BODY_MAX_CHARS

# A full inbox refuses further sends (409 inbox_full) until its agents pop some.
MAX_PENDING_PER_INBOX = 256
BODY_MAX_CHARS = MESSAGE_BODY_MAX_CHARS
SUBJECT_MAX_CHARS = 200
# Scrubbing costs about a second per MiB of text, and a request may carry 1 MiB: only a
# window that can reach the cap is scrubbed. The window's last margin is dropped as well,
# since a secret cut by the window's end may not be recognised there.
SCRUB_WINDOW_CHARS = 65_536
SCRUB_MARGIN_CHARS = 8_192
# Send keys and pop request ids (DESIGN.md section 13): how long a retry is recognised.
RETRY_ID_MAX_CHARS = 200
RETRY_WINDOW = timedelta(hours=24)
