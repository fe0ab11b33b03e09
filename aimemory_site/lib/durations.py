"""Durations as people write them (``90s``, ``45m``, ``2h``, ``7d``, or plain seconds), and
the range a message's expiry must fall in (docs/reference.md#messages).

Django-free: the CLI parses ``message send --expires-in`` with it, and the settings parse
``AI_MEMORY_MESSAGE_TTL`` with it, so the two spellings are one rule.
"""

from __future__ import annotations

import re

# A message expires at the earliest a minute after it was sent, at the latest 30 days.
MESSAGE_EXPIRY_MIN_SECONDS = 60
MESSAGE_EXPIRY_MAX_SECONDS = 30 * 86_400

_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3_600, "d": 86_400}
_DURATION = re.compile(r"(\d{1,9})([smhd]?)")
DURATION_FORMS = "a number of seconds, or a number followed by s, m, h or d (90s, 45m, 2h, 7d)"


def duration_seconds(text: str) -> int:
    """The seconds ``text`` says, or ValueError saying which forms are understood.

    Whitespace around it is ignored; the unit is one lower-case letter; no fractions,
    signs or combinations (``1h30m``): a duration that reads two ways is refused.
    """
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"a duration must be {DURATION_FORMS}, got {text[:40]!r}")
    number, unit = match.groups()
    return int(number) * _UNIT_SECONDS[unit]


def duration_text(seconds: int) -> str:
    """``seconds`` in the largest unit that says it exactly: ``2h``, ``90s``, ``7d``."""
    for unit in ("d", "h", "m"):
        if seconds and seconds % _UNIT_SECONDS[unit] == 0:
            return f"{seconds // _UNIT_SECONDS[unit]}{unit}"
    return f"{seconds}s"


def expiry_in_range(seconds: int) -> bool:
    """Whether a message may expire ``seconds`` after it is sent."""
    return MESSAGE_EXPIRY_MIN_SECONDS <= seconds <= MESSAGE_EXPIRY_MAX_SECONDS


def expiry_range_text() -> str:
    """The range in words, for error messages: ``60..2592000 seconds (1 minute to 30 days)``."""
    return (
        f"{MESSAGE_EXPIRY_MIN_SECONDS}..{MESSAGE_EXPIRY_MAX_SECONDS} seconds "
        f"(1 minute to {MESSAGE_EXPIRY_MAX_SECONDS // 86_400} days)"
    )
