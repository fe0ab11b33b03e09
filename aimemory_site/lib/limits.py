"""Limits shared by every surface: the list limit, the body caps and the text cap.

Django-free: the CLI clamps ``--limit`` with it, exactly as the server does, and quotes
the caps the server applies to the bodies it is given.
"""

from __future__ import annotations

# A message body keeps at most this many characters (docs/reference.md#messages). Here, not in
# messaging, because the CLI says so when it reports a cut body.
MESSAGE_BODY_MAX_CHARS = 8000
# A subject is one line of at most this many characters; the decisions helpers write
# subjects the send keeps whole.
MESSAGE_SUBJECT_MAX_CHARS = 200
# A handoff keeps as much as a message; a page, a project's standing knowledge, twice that.
HANDOFF_BODY_MAX_CHARS = 8000
# How long an unclaimed handoff waits, unless AI_MEMORY_HANDOFF_TTL_DAYS says otherwise.
HANDOFF_TTL_DAYS_DEFAULT = 7
PAGE_BODY_MAX_CHARS = 16_000
# A project brief (pinned pages, rules and slots, pointers to the rest) fits in this many.
BRIEF_MAX_CHARS = 12_000
# How many handoffs and pages one listing shows (newest handoffs, pages in path order).
HANDOFF_LIST_LIMIT = 50
PAGE_LIST_LIMIT = 200

# Scrubbing costs about a second per MiB of text, and a request may carry 1 MiB: only a
# window that can reach the cap is scrubbed. The window's last margin is dropped as well,
# since a secret cut by the window's end may not be recognised there.
SCRUB_WINDOW_CHARS = 65_536
SCRUB_MARGIN_CHARS = 8_192

# The longest a pop, a status or a session wait waits on the server, in seconds
# (docs/reference.md#waiting-and-waking); more is clamped. The CLI waits that much longer
# for the answer.
WAIT_SECONDS_MAX = 60

LIST_LIMIT_MIN = 1
LIST_LIMIT_DEFAULT = 50
LIST_LIMIT_MAX = 200

# Search (docs/reference.md#search-and-threads): at most this many hits, the query's
# longest length (longer is 400 invalid_query) and a snippet's.
SEARCH_LIMIT_DEFAULT = 20
SEARCH_LIMIT_MAX = 100
SEARCH_QUERY_MAX_CHARS = 500
SEARCH_SNIPPET_MAX_CHARS = 200


def whole_number(value: object) -> int | None:
    """``value`` as an int when it is a whole number, else None: an int (a boolean is no
    number), or a float with nothing after the point, since JSON (and JSON Schema's
    ``integer``) lets a client write 30 as ``30.0``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def limit_clamp(limit: int | None) -> int:
    """Clamp a list limit to 1..200 (default 50): out-of-range values are clamped."""
    if limit is None:
        return LIST_LIMIT_DEFAULT
    return max(LIST_LIMIT_MIN, min(LIST_LIMIT_MAX, limit))


def wait_seconds_clamp(seconds: int) -> int:
    """Clamp a wait to 0..60 seconds, as every call that waits does; the API says the wait
    used (docs/reference.md#waiting-and-waking), and the CLI says when it is not the one
    asked for."""
    return max(0, min(WAIT_SECONDS_MAX, seconds))


def search_limit_clamp(limit: int | None) -> int:
    """Clamp a search limit to 1..100 (default 20), as ``limit_clamp`` clamps a list's."""
    if limit is None:
        return SEARCH_LIMIT_DEFAULT
    return max(LIST_LIMIT_MIN, min(SEARCH_LIMIT_MAX, limit))


def text_cap(text: str, limit: int, label: str) -> str:
    """If longer than ``limit`` chars, keep the first ``limit`` chars and append
    ``f"\\n[{label} truncated; {n} chars omitted]"`` where n = chars dropped; else
    return ``text`` unchanged. Lengths are in characters (code points), not bytes.
    """
    if limit < 0:
        raise ValueError(f"limit must not be negative, got {limit}")
    omitted = len(text) - limit
    if omitted <= 0:
        return text
    return text[:limit] + truncation_marker(label, omitted)


def truncation_marker(label: str, omitted: int) -> str:
    """The line appended to a capped text: ``\n[{label} truncated; {n} chars omitted]``."""
    return f"\n[{label} truncated; {omitted} chars omitted]"
