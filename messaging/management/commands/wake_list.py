"""``ai-memory manage wake_list [WS/PROJ]``: the wake webhooks, secrets never shown."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from messaging.models import WakeWebhook
from messaging.wake_webhooks import wake_webhook_line
from projects.management.commands._lookups import project_named


class Command(BaseCommand):
    help = (
        "List wake webhooks, one a line: id, project, dialect, the URL without password "
        "or query, and enabled or disabled with the reason. Never a secret or token."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project", nargs="?", metavar="WS/PROJ")

    def handle(self, *args: Any, **options: Any) -> None:
        webhooks = WakeWebhook.objects.select_related("project__workspace").order_by("id")
        if options["project"]:
            webhooks = webhooks.filter(project=project_named(options["project"]))
        for webhook in webhooks:
            self.stdout.write(wake_webhook_line(webhook))
