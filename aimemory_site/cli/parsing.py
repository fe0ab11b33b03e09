"""The CLI's argument parser: options and positionals in any order, for every command.

Plain argparse stops matching positionals once it has passed over an optional one, so
``page write PATH --json BODY`` is refused ("unrecognized arguments") although the help
writes the command that way. ``parse_intermixed_args`` fixes that but refuses a parser
with subcommands; this class uses it for the commands themselves and the plain parse for
the levels that only choose a subcommand. Subparsers are of their parent's class, so
giving it to the top-level parser gives it to every command.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any


class CommandParser(argparse.ArgumentParser):
    # Set while ``parse_known_intermixed_args`` runs: it calls ``parse_known_args`` twice
    # itself (options first, then positionals), and those calls must take the plain path.
    _intermixing = False

    def _takes_intermixed(self) -> bool:
        """False for a parser that chooses a subcommand or hands its rest on unparsed
        (``manage``): intermixed parsing refuses both."""
        return not self._intermixing and not any(
            action.nargs in (argparse.PARSER, argparse.REMAINDER)
            for action in self._get_positional_actions()
        )

    def parse_known_args(
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> tuple[Any, list[str]]:
        if not self._takes_intermixed():
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False
