"""``ai-memory manage issue_token USERNAME``: make an API token from the shell."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from aimemory_site.lib.server_location import own_url
from projects.auth import auth_enabled
from projects.services import api_token_issue

# What every client of an authenticated server needs: the CLI and hooks read the variable,
# MCP clients send the header.
CLIENT_TOKEN_ENV = "AI_MEMORY_AUTH_TOKEN"


class Command(BaseCommand):
    help = (
        "Issue an API token for a user and print its key once (only a keyed hash is stored). "
        "The first user token of a server without AI_MEMORY_ROOT_TOKEN turns authentication "
        "on: from then on every client needs a token. "
        "Example: ai-memory manage issue_token alice --name laptop --create-user"
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
        was_anonymous = not auth_enabled()
        token, key = api_token_issue(user=user, name=options["name"])
        if was_anonymous:
            self._say_authentication_turned_on()
        self.stderr.write(f"Issued token {token.prefix}… for {username}. It is shown only once:")
        self.stdout.write(key)

    def _say_authentication_turned_on(self) -> None:
        """On stderr: stdout is the key alone, for ``KEY=$(ai-memory manage issue_token ...)``."""
        # The address people reach the server at, else its serve address: an example
        # with another port than the server's own would send the admin astray.
        base = own_url(settings.AI_MEMORY_PUBLIC_URL, settings.AI_MEMORY_BIND)
        mcp_url = f"{base or '<server URL>'}/mcp"
        self.stderr.write(
            "Authentication is now on: this is the server's first token and "
            "AI_MEMORY_ROOT_TOKEN is not set, so every client must now send a token "
            "(a call without one is refused with 401).\n"
            f"  CLI and hooks: export {CLIENT_TOKEN_ENV}=<key>\n"
            '  MCP clients: the header "Authorization: Bearer <key>", e.g.\n'
            f"    claude mcp add --scope user --transport http ai-memory {mcp_url} "
            '--header "Authorization: Bearer <key>"'
        )
