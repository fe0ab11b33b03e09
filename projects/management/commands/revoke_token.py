"""``ai-memory manage revoke_token PREFIX``: revoke an API token from the shell."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from projects.models import ApiToken
from projects.services import api_token_revoke


class Command(BaseCommand):
    help = (
        "Revoke the API token whose prefix (as admin and issue_token show it, e.g. "
        "aim_XD4JxDP0) is given; the whole key is taken too. Its holder's next call, and "
        "the next look of a call it has parked, is refused with 401. "
        "Example: ai-memory manage revoke_token aim_XD4JxDP0"
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("prefix", metavar="PREFIX")

    def handle(self, *args: Any, **options: Any) -> None:
        given: str = options["prefix"].strip().rstrip("…")
        if not given:
            raise CommandError("give the token's prefix, e.g. aim_XD4JxDP0")
        # The shown prefix, or a key pasted whole (which begins with its prefix).
        found = [t for t in ApiToken.objects.select_related("user") if given.startswith(t.prefix)]
        if not found:
            raise CommandError(f"no token with the prefix {given[:16]!r}")
        if len(found) > 1:
            raise CommandError(
                f"{len(found)} tokens have the prefix {given[:16]!r}; revoke one in the admin"
            )
        [token] = found
        if token.revoked_at is not None:
            self.stdout.write(f"Token {token.prefix}… of {token.user} was revoked already.")
            return
        api_token_revoke(token=token)
        self.stdout.write(f"Revoked token {token.prefix}… of {token.user}.")
