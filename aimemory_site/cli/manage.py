"""``ai-memory manage COMMAND [ARGS]``: a Django management command with the server's
settings and environment, for scripts and installs without a checkout (DESIGN.md 8)."""

from __future__ import annotations

import argparse
import os

from aimemory_site.cli.help_text import SubParsers, add_command


def add_parser(subparsers: SubParsers) -> None:
    parser = add_command(
        subparsers,
        "manage",
        summary="run a server management command (users, tokens, grants)",
        paragraphs=[
            "Run a Django management command with the server's settings, e.g. create_user, "
            "issue_token, grant, project_mode, createsuperuser or migrate. Each exits 1 with "
            "a message when the user or project it names does not exist."
        ],
        examples=[
            "ai-memory manage create_user alice",
            "ai-memory manage issue_token alice --name laptop",
            "ai-memory manage grant bob acme/secretproj read",
            "ai-memory manage project_mode acme/secretproj restricted",
        ],
    )
    parser.add_argument("arguments", nargs=argparse.REMAINDER, metavar="COMMAND [ARGS]")
    parser.set_defaults(handler=run, command_parser=parser)


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aimemory_site.settings")
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(["ai-memory manage", *(args.arguments or ["help"])])
    except SystemExit as exc:  # CommandError exits 1, argument errors 2
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0
