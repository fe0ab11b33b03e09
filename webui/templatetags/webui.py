"""Template filters of the web mailbox."""

from __future__ import annotations

from datetime import datetime

from django import template
from django.utils import timezone

register = template.Library()

_MINUTE = 60
_HOUR = 60 * _MINUTE
_DAY = 24 * _HOUR


def _count(n: int, unit: str) -> str:
    return f"{n} {unit}{'' if n == 1 else 's'} ago"


def age_text(then: datetime, now: datetime) -> str:
    """How long before ``now`` ``then`` was, in words: ``just now``, ``3 hours ago``.

    Months are 30 days and years 365, as an age on a page needs no calendar precision.
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


@register.filter
def humanize_age(then: datetime) -> str:
    """The age of ``then`` as of this request, e.g. ``5 minutes ago``."""
    return age_text(then, timezone.now())
