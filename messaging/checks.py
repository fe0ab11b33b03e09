"""System checks: a broken messaging config stops the server at start, not at a send."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, register
from django.core.exceptions import ImproperlyConfigured

from aimemory_site.lib.scrubbing import scrubber_configured
from messaging.admission_config import admission_webhooks_configured


@register()
def sanitize_config_check(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    try:
        scrubber_configured()
    except ImproperlyConfigured as exc:
        return [
            Error(
                str(exc), hint="Fix the [sanitize] table of AI_MEMORY_CONFIG.", id="messaging.E001"
            )
        ]
    return []


@register()
def admission_config_check(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    try:
        admission_webhooks_configured()
    except ImproperlyConfigured as exc:
        return [
            Error(
                str(exc),
                hint="Fix [[admission_webhooks]] in AI_MEMORY_CONFIG or "
                "AI_MEMORY_ADMISSION_WEBHOOKS_JSON (only one of them may set the webhooks).",
                id="messaging.E002",
            )
        ]
    return []


@register()
def notify_urls_check(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Every server-wide notification URL must parse; the error masks it."""
    from messaging.notifications import notify_url_refusal, server_notify_urls

    return [
        Error(
            f"AI_MEMORY_NOTIFY_URLS: target {index} (of the URLs separated by spaces or "
            f"commas): {refusal}",
            hint="Fix or remove it in AI_MEMORY_NOTIFY_URLS.",
            id="messaging.E003",
        )
        for index, url in enumerate(server_notify_urls(), start=1)
        if (refusal := notify_url_refusal(url)) is not None
    ]
