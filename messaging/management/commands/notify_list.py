"""``ai-memory manage notify_list [USER]``: the notification targets, URLs masked."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from messaging.models import NotificationTarget
from messaging.notifications import notification_target_line
from projects.management.commands._lookups import user_named


class Command(BaseCommand):
    help = (
        "List notification targets, one a line: id, user, label, the URL with every "
        "password, token and key masked, and enabled or disabled with the reason."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username", nargs="?")

    def handle(self, *args: Any, **options: Any) -> None:
        targets = NotificationTarget.objects.select_related("user").order_by("id")
        if options["username"]:
            targets = targets.filter(user=user_named(options["username"]))
        for target in targets:
            self.stdout.write(notification_target_line(target))
