"""The limits of messages (DESIGN.md section 5), in one place."""

from __future__ import annotations

# A full inbox refuses further sends (409 inbox_full) until its agents pop some.
MAX_PENDING_PER_INBOX = 256
BODY_MAX_CHARS = 8000
SUBJECT_MAX_CHARS = 200
# Scrubbing costs about a second per MiB of text, and a request may carry 1 MiB: only a
# window that can reach the cap is scrubbed. The window's last margin is dropped as well,
# since a secret cut by the window's end may not be recognised there.
SCRUB_WINDOW_CHARS = 65_536
SCRUB_MARGIN_CHARS = 8_192
