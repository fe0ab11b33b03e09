"""``ai-memory manage wake_add WS/PROJ URL [--dialect D] [--token T]``: a wake webhook."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from messaging.models import WakeWebhook
from messaging.wake_webhooks import wake_webhook_add
from projects.management.commands._lookups import project_named


class Command(BaseCommand):
    help = (
        "Call URL when mail arrives for WS/PROJ and no session of it is parked waiting, at "
        "most once per AI_MEMORY_WAKE_DEBOUNCE seconds. A generic webhook gets signed counts; "
        "its secret is printed alone on stdout, once. A claude-routine webhook fires a "
        "routine with --token as its bearer. URL: https://, or http:// on loopback with "
        "AI_MEMORY_ALLOW_LOOPBACK_WEBHOOKS=1. Example: ai-memory manage wake_add acme/bot "
        "https://hooks.example.com/ai-memory"
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project", metavar="WS/PROJ")
        parser.add_argument("url")
        parser.add_argument(
            "--dialect",
            choices=WakeWebhook.Dialect.values,
            default=WakeWebhook.Dialect.GENERIC,
            help="what is sent: generic (signed counts, default) or claude-routine",
        )
        parser.add_argument("--token", help="the bearer token a claude-routine webhook sends")

    def handle(self, *args: Any, **options: Any) -> None:
        project = project_named(options["project"])
        try:
            webhook = wake_webhook_add(
                project=project,
                url=options["url"],
                dialect=options["dialect"],
                token=options["token"],
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if webhook.dialect == WakeWebhook.Dialect.GENERIC:
            # On stderr: stdout is the secret alone, for ``SECRET=$(ai-memory manage ...)``.
            self.stderr.write(
                f"Added wake webhook {webhook.pk} of {options['project']}. Its signing "
                "secret is shown only once:"
            )
            self.stdout.write(webhook.secret)
        else:
            self.stdout.write(f"added wake webhook {webhook.pk} of {options['project']}")
