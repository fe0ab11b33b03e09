"""``ai-memory manage COMMAND [ARGS]``: a Django management command with the server's
settings and environment, for scripts and installs without a checkout.

A command runs only on the server's own database, migrated, with the server's secret
key: otherwise one line says which database or data dir was found and what to run, and
nothing is created (no data dir, no SQLite file). ``migrate`` alone may create them.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path

import dj_database_url

from aimemory_site.cli.errors import CliError
from aimemory_site.cli.help_text import SubParsers, describe
from aimemory_site.lib.server_location import (
    DATA_DIR_ENV,
    DATABASE_URL_ENV,
    SECRET_KEY_ENV,
    data_dir,
    database_url,
    is_sqlite,
    secret_key_kept,
)

PROG = "ai-memory manage"
_HELP_FLAGS = frozenset({"-h", "--help"})
# Django's own answers that read no data: `help` (the command list, or a command's
# options), and its version.
_HELP_COMMANDS = frozenset({"help", "version", "--version"}) | _HELP_FLAGS
# Commands that look at settings or code only, never at the database.
_DATABASE_FREE = frozenset({"check", "diffsettings", "makemigrations"})
# The one command that may create the data dir and the database.
_CREATES_DATABASE = "migrate"
# Commands that inspect migrations: they open the database but need none applied.
_BEFORE_MIGRATING = frozenset({"showmigrations", "sqlmigrate"})
FIRST_RUN = "run `ai-memory serve` or `ai-memory manage migrate` first"
# SECRET_KEY for a process that runs no command on data (help, or a refusal): without it
# the settings would make and keep a new key, and the data dir with it, where it runs.
_NO_DATA_SECRET_KEY = "ai-memory-manage-reads-no-data"


def add_parser(subparsers: SubParsers) -> None:
    parser = subparsers.add_parser(
        "manage",
        help="run a server management command (users, tokens, grants)",
        description=describe(
            [
                "Run a Django management command with the server's settings, e.g. "
                "create_user, issue_token, grant, project_mode, purge_messages, createsuperuser or migrate, "
                "on the database of AI_MEMORY_DATA_DIR (default ./var) or DATABASE_URL, as "
                "`ai-memory serve` does: run it where the server runs. Each exits 1 with a "
                "message when the user or project it names does not exist, or when the "
                "database does not exist or is not migrated yet (only migrate creates it).",
            ],
            [
                "ai-memory manage create_user alice",
                "ai-memory manage issue_token alice --name laptop",
                "ai-memory manage grant bob acme/secretproj read",
                "ai-memory manage project_mode acme/secretproj restricted",
                "ai-memory manage help create_user",
            ],
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        add_help=False,
        usage=f"{PROG} COMMAND [ARGS]",
    )
    # Not argparse's help action: `--help` shows the commands, as `manage` alone does.
    parser.add_argument(
        "-h", "--help", action="store_true", dest="help_asked", help=argparse.SUPPRESS
    )
    parser.add_argument("arguments", nargs=argparse.REMAINDER, metavar="COMMAND [ARGS]")
    parser.set_defaults(handler=run, command_parser=parser)


def run(args: argparse.Namespace) -> int:
    arguments: list[str] = args.arguments or ["help"]
    if args.help_asked and arguments[0] != "help":
        arguments = ["help", *args.arguments]  # `--help create_user`: that command's help
    command = arguments[0]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aimemory_site.settings")
    if command in _HELP_COMMANDS or _HELP_FLAGS.intersection(arguments):
        os.environ.setdefault(SECRET_KEY_ENV, _NO_DATA_SECRET_KEY)
        if command in _HELP_FLAGS or arguments == ["help"]:
            # As `manage` alone: what the command is for, then every command to run.
            parser: argparse.ArgumentParser = args.command_parser
            print(f"{parser.format_usage()}\n{parser.description}")
            return _execute(["help"])
        return _execute(arguments)
    if command == _CREATES_DATABASE:
        from aimemory_site.cli.database import make_data_dir, require_database_opens, setup_django

        make_data_dir()
        setup_django()
        require_database_opens()  # a PostgreSQL database is made with createdb, not here
    elif command not in _DATABASE_FREE:
        _require_the_servers_database(command)
    return _execute(arguments)


def _execute(arguments: Sequence[str]) -> int:
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line([PROG, *arguments])
    except SystemExit as exc:  # CommandError exits 1, argument errors 2
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


def _require_the_servers_database(command: str) -> None:
    """Raise CliError unless the database exists (and, but for the migration inspectors,
    is migrated) and the data dir holds the server's secret key. Creates nothing."""
    database = dj_database_url.parse(database_url())
    if is_sqlite(database) and not Path(database["NAME"]).is_file():
        # The default file moves with the working directory, the usual mistake.
        where = (
            ""
            if os.environ.get(DATABASE_URL_ENV, "").strip()
            else f" ({DATA_DIR_ENV} is {data_dir()})"
        )
        raise CliError(
            f"no database at {database['NAME']}{where}: {FIRST_RUN}, or run this where "
            "the server runs"
        )
    key_kept = secret_key_kept()
    if not key_kept:
        os.environ[SECRET_KEY_ENV] = _NO_DATA_SECRET_KEY
    from aimemory_site.cli.database import require_database_opens, setup_django

    setup_django()

    require_database_opens()
    if command not in _BEFORE_MIGRATING:
        _require_migrated()
    if not key_kept:
        # Token keys are stored as hashes keyed with the secret key the server keeps in
        # its data dir: a token made under a new key here would never authenticate there.
        raise CliError(
            f"the data dir {data_dir()} holds no secret key, so it is not the server's "
            "(a token made here would not match the server's): run this where `ai-memory "
            f"serve` runs, or with its {DATA_DIR_ENV} (or {SECRET_KEY_ENV})"
        )


def _require_migrated() -> None:
    """Raise CliError when the database has migrations still to apply (a new empty
    database included). Precondition: it opens."""
    from django.conf import settings
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    from aimemory_site.lib.server_location import describe_database

    executor = MigrationExecutor(connection)
    pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if pending:
        raise CliError(
            f"the database {describe_database(settings.DATABASES['default'])} is not "
            f"migrated ({len(pending)} migrations to apply): {FIRST_RUN}"
        )
