"""``ai-memory manage grant USER WS/PROJ read|write|none``: set or remove a user's grant."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from projects.management.commands._lookups import project_named, user_named
from projects.services import grant_set


class Command(BaseCommand):
    help = (
        "Give a user read or write access to a restricted project, or take it away with "
        "'none'. Example: ai-memory manage grant bob acme/secretproj read"
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("project", metavar="WS/PROJ")
        parser.add_argument("level", choices=["read", "write", "none"])

    def handle(self, *args: Any, **options: Any) -> None:
        user = user_named(options["username"])
        project = project_named(options["project"])
        level = None if options["level"] == "none" else options["level"]
        grant_set(user=user, project=project, level=level)
        self.stdout.write(f"{user.username}: {options['level']} on {project}")
