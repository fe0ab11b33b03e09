"""Template filters of the web mailbox."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from django import template
from django.utils import timezone

from aimemory_site.lib.ages import age_text

register = template.Library()


@register.filter
def humanize_age(then: datetime) -> str:
    """The age of ``then`` as of this request, e.g. ``5 minutes ago``."""
    return age_text(then, timezone.now())


@register.filter
def in_minutes(duration: timedelta) -> str:
    """``duration`` in whole minutes, rounded up so a wait is never understated."""
    minutes = max(1, math.ceil(duration.total_seconds() / 60))
    return f"{minutes} minute" if minutes == 1 else f"{minutes} minutes"
