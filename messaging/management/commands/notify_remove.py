"""``ai-memory manage notify_remove ID``: remove a notification target."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from messaging.models import NotificationTarget


class Command(BaseCommand):
    help = "Remove notification target ID (see notify_list), with its delivery log."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("id", type=int)

    def handle(self, *args: Any, **options: Any) -> None:
        deleted, _ = NotificationTarget.objects.filter(pk=options["id"]).delete()
        if not deleted:
            raise CommandError(f"no notification target {options['id']}")
        self.stdout.write(f"removed notification target {options['id']}")
