"""``ai-memory manage wake_remove ID``: remove a wake webhook."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from messaging.models import WakeWebhook


class Command(BaseCommand):
    help = "Remove wake webhook ID (see wake_list); a wake already queued for it is dropped."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("id", type=int)

    def handle(self, *args: Any, **options: Any) -> None:
        deleted, _ = WakeWebhook.objects.filter(pk=options["id"]).delete()
        if not deleted:
            raise CommandError(f"no wake webhook {options['id']}")
        self.stdout.write(f"removed wake webhook {options['id']}")
