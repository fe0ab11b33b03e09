"""System checks: a bad ``AI_MEMORY_RATE_LIMIT`` stops the server at start, not per request."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, register
from django.core.exceptions import ImproperlyConfigured

from projects.rate_limits import rate_limit_configured


@register()
def rate_limit_setting_check(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    try:
        rate_limit_configured()
    except ImproperlyConfigured as exc:
        return [
            Error(
                str(exc),
                hint="For example AI_MEMORY_RATE_LIMIT=120/minute; unset it for no limit.",
                id="projects.E001",
            )
        ]
    return []
