"""Template filters of the web mailbox."""

from __future__ import annotations

from datetime import datetime

from django import template
from django.utils import timezone

from aimemory_site.lib.ages import age_text

register = template.Library()


@register.filter
def humanize_age(then: datetime) -> str:
    """The age of ``then`` as of this request, e.g. ``5 minutes ago``."""
    return age_text(then, timezone.now())
