"""``ai-memory manage create_user USER [--superuser]``: a user for tokens, grants and the web."""

from __future__ import annotations

import os
from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser

from projects.services import user_create

PASSWORD_ENV = "AI_MEMORY_USER_PASSWORD"


class Command(BaseCommand):
    help = (
        f"Create a user. The password comes from {PASSWORD_ENV} (never from the command "
        "line, which other users of the machine can read); without it the user cannot sign "
        "in to the web, but may hold API tokens. Example: ai-memory manage create_user alice"
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--superuser", action="store_true", help="root on every surface")

    def handle(self, *args: Any, **options: Any) -> None:
        username: str = options["username"]
        if User.objects.filter(username=username).exists():
            raise CommandError(f"a user {username!r} already exists")
        user_create(
            username=username,
            superuser=options["superuser"],
            password=os.environ.get(PASSWORD_ENV, ""),
        )
        kind = "superuser" if options["superuser"] else "user"
        self.stdout.write(f"created {kind} {username}")
