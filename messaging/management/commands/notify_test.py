"""``ai-memory manage notify_test ID``: send a test notification to a target."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from messaging.models import NotificationTarget
from messaging.notifications import notification_target_test


class Command(BaseCommand):
    help = (
        "Send notification target ID a test notification now and say whether it went; "
        "one that went is enabled again if failures had disabled it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("id", type=int)

    def handle(self, *args: Any, **options: Any) -> None:
        target = NotificationTarget.objects.select_related("user").filter(pk=options["id"]).first()
        if target is None:
            raise CommandError(f"no notification target {options['id']}")
        error = notification_target_test(target)
        if error is not None:
            raise CommandError(f"not sent: {error}")
        self.stdout.write(f"sent a test notification to target {target.pk}")
