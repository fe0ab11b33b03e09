"""Whether the server's database can be used, said in one line: for ``serve`` and
``manage``, which a new user runs before anything else and where a traceback would hide
the one thing to do (create the database, migrate it, or run in the server's directory).

Everything but ``make_data_dir`` needs Django's settings configured.
"""

from __future__ import annotations

import django
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, OperationalError, connections

from aimemory_site.cli.errors import CliError
from aimemory_site.lib.server_location import (
    data_dir,
    describe_database,
    is_postgresql,
    is_sqlite,
    postgresql_server,
)


def make_data_dir() -> None:
    """Make the data dir (and its parents), or raise CliError saying why it cannot be."""
    directory = data_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"cannot create the data dir {directory}: {exc.strerror or exc}") from None


def setup_django() -> None:
    """``django.setup()``, with a setting the server refuses (a malformed
    ``AI_MEMORY_ALLOWED_ORIGINS``, say) said in one line instead of a traceback."""
    try:
        django.setup()
    except ImproperlyConfigured as exc:
        raise CliError(f"refusing to start: {exc}") from None


def _reason(exc: BaseException) -> str:
    """The driver's own words, on one line, without psycopg's "connection failed:"."""
    cause = exc.__cause__ or exc
    first = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
    return first.removeprefix("connection failed: ").strip()


def require_database_opens(alias: str = DEFAULT_DB_ALIAS) -> None:
    """Connect to the database (SQLite creates its file if its directory allows), or
    raise CliError saying which database could not be opened and what to do."""
    database = settings.DATABASES[alias]
    try:
        connections[alias].ensure_connection()
    except OperationalError as exc:
        reason = _reason(exc)
        name = database["NAME"]
        if is_postgresql(database) and f'database "{name}" does not exist' in reason:
            raise CliError(
                f"PostgreSQL database {name} does not exist on "
                f"{postgresql_server(database)}: create it there first: createdb {name}"
            ) from None
        if is_sqlite(database):
            raise CliError(
                f"cannot open the SQLite database {name}: {reason} (its directory must "
                "exist and be writable)"
            ) from None
        raise CliError(
            f"cannot open the database {describe_database(database)}: {reason}"
        ) from None
