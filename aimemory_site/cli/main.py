"""The ``ai-memory`` entry point: argument parsing, dispatch and exit codes.

Exit 0 on success, 1 on a runtime or server error (one line on stderr), 2 on bad
arguments. Only ``serve`` and ``manage`` load Django, inside their ``run``; the client commands import
none of it, as a hook runs them at every agent session start.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from aimemory_site.cli import (
    brief,
    completion,
    decision,
    hook,
    init,
    knowledge,
    manage,
    messages,
    serve,
)
from aimemory_site.cli.client import AUTH_TOKEN_ENV, DEFAULT_SERVER_URL, SERVER_URL_ENV
from aimemory_site.cli.errors import CliError, UsageError
from aimemory_site.cli.help_text import describe
from aimemory_site.cli.parsing import CommandParser

USAGE_EXIT_CODE = 2
DISTRIBUTION_NAME = "ai-memory-server"
# The exit status of a process stopped by Ctrl-C, as shells report it.
INTERRUPTED_EXIT_CODE = 130


class _VersionAction(argparse.Action):
    """``--version``: the installed package's version. Looked up only when asked for, as
    reading package metadata would slow every hook's start."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        import importlib.metadata

        try:
            version = importlib.metadata.version(DISTRIBUTION_NAME)
        except importlib.metadata.PackageNotFoundError:
            version = "(not installed as a package)"
        print(f"{parser.prog} {version}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    # Typed as the base class: the command modules take subparsers of ArgumentParser.
    parser: argparse.ArgumentParser = CommandParser(
        prog="ai-memory",
        description=describe(
            [
                "Claim-once cross-project inboxes for coding agents: an agent in one "
                "repository hands a self-contained request to the project of another, which "
                "pops it exactly once. Within a project, sessions leave handoffs for the next "
                "session and keep knowledge in pages. 'serve' runs the server; the other "
                "commands talk to it.",
                f"{SERVER_URL_ENV}: the server the client commands call (default "
                f"{DEFAULT_SERVER_URL}). {AUTH_TOKEN_ENV}: their bearer token (default none).",
            ],
            [
                "ai-memory serve",
                "ai-memory init",
                'ai-memory message send --to-workspace default --to-project project-b "..."',
                "ai-memory message pop",
                'ai-memory handoff create "Done: X. Next: Y."',
                "ai-memory page list",
                "ai-memory brief",
                "source <(ai-memory completion bash)    # or zsh",
            ],
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_VersionAction)
    commands = parser.add_subparsers(dest="command", required=True)
    serve.add_parser(commands)
    commands.choices["serve"].set_defaults(handler=serve.run)
    manage.add_parser(commands)
    messages.add_parser(commands)
    decision.add_parser(commands)
    knowledge.add_parsers(commands)
    brief.add_parser(commands)
    hook.add_parser(commands)
    init.add_parser(commands)
    completion.add_parser(commands, parser)
    # The usage line names every command, in the order above.
    commands.metavar = "{" + ",".join(commands.choices) + "}"
    return parser


def _exit_code(code: str | int | None) -> int:
    return code if isinstance(code, int) else (0 if code is None else 1)


def _replace_unencodable_output() -> None:
    # A body or notice with characters the terminal's encoding lacks (an emoji on a
    # latin-1 console) prints with replacements rather than failing halfway.
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="replace")


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``ai-memory`` command and return its exit code."""
    _replace_unencodable_output()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or bad arguments (2)
        return _exit_code(exc.code)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except UsageError as exc:
        # As argparse reports its own errors: the command's usage, then the reason.
        command_parser: argparse.ArgumentParser = args.command_parser
        command_parser.print_usage(sys.stderr)
        print(f"{command_parser.prog}: error: {exc}", file=sys.stderr)
        return USAGE_EXIT_CODE
    except CliError as exc:
        print(f"ai-memory: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return INTERRUPTED_EXIT_CODE
    except BrokenPipeError:
        # The reader (``| head``) left; stop writing to it, also at interpreter exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
