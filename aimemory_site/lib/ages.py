"""How long ago something happened, in words: one rule for the web pages and the CLI.

Django-free, since the CLI prints ages too; it reads like the largest unit of Django's
``timesince`` ("3 days ago", "2 months ago"), with months of 30 days and years of 365.
"""

from __future__ import annotations

from datetime import datetime

_MINUTE = 60
_HOUR = 60 * _MINUTE
_DAY = 24 * _HOUR


def _count(n: int, unit: str) -> str:
    return f"{n} {unit}{'' if n == 1 else 's'} ago"


def age_text(then: datetime, now: datetime) -> str:
    """How long before ``now`` ``then`` was: ``just now``, ``3 hours ago``, ``1 year ago``.

    A time in the future (clock skew between hosts) reads ``just now``.
    """
    seconds = int((now - then).total_seconds())
    if seconds < _MINUTE:
        return "just now"
    if seconds < _HOUR:
        return _count(seconds // _MINUTE, "minute")
    if seconds < _DAY:
        return _count(seconds // _HOUR, "hour")
    days = seconds // _DAY
    if days < 30:
        return _count(days, "day")
    if days // 30 < 12:
        return _count(days // 30, "month")
    return _count(max(1, days // 365), "year")
