"""``ai-memory manage notify_add USER URL [--label L]``: a notification target of USER's."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from messaging.notifications import notification_target_add
from projects.management.commands._lookups import user_named


class Command(BaseCommand):
    help = (
        "Tell USER of every question they may answer at URL, an Apprise URL (ntfy://topic, "
        "mailto://..., tgram://..., slack://..., json://host/path). Prints the new target's "
        "id. Example: ai-memory manage notify_add alice ntfy://ntfy.sh/alice-decisions"
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("url")
        parser.add_argument("--label", default="", help="a name for the target")

    def handle(self, *args: Any, **options: Any) -> None:
        user = user_named(options["username"])
        try:
            target = notification_target_add(user=user, url=options["url"], label=options["label"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(str(target.pk))
