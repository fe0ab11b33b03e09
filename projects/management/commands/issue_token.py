"""``manage.py issue_token USERNAME``: make an API token from the shell."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from projects.services import api_token_issue


class Command(BaseCommand):
    help = (
        "Issue an API token for a user and print its key once (only a keyed hash is stored). "
        "Example: manage.py issue_token alice --name laptop --create-user"
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="a label for the token, e.g. 'laptop'")
        parser.add_argument(
            "--create-user", action="store_true", help="create the user if it does not exist"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        user_model = get_user_model()
        username: str = options["username"]
        user = user_model.objects.filter(username=username).first()
        if user is None:
            if not options["create_user"]:
                raise CommandError(f"no user {username!r}; pass --create-user to create one")
            user = user_model.objects.create_user(username=username)
        token, key = api_token_issue(user=user, name=options["name"])
        self.stderr.write(f"Issued token {token.prefix}… for {username}. It is shown only once:")
        self.stdout.write(key)
