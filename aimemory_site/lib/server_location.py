"""Where a server keeps its state, which database it opens and where it answers, read
from the environment alone.

The settings take the data dir and the database from here; ``ai-memory manage`` reads
them before Django loads, so that it can refuse a missing database without creating
one, and ``ai-memory serve`` names all three in its start line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aimemory_site.lib.environment import declared

DATA_DIR_ENV = "AI_MEMORY_DATA_DIR"
DATABASE_URL_ENV = "DATABASE_URL"
SECRET_KEY_ENV = "SECRET_KEY"
# Relative to the working directory: a server started in a checkout keeps its state there.
DEFAULT_DATA_DIR = "./var"
SQLITE_FILE_NAME = "ai-memory.sqlite3"
# The generated secret key, kept in the data dir when SECRET_KEY is not given.
SECRET_KEY_FILE_NAME = "secret_key"
POSTGRESQL_DEFAULT_PORT = 5432


def _env(name: str) -> str:
    return os.environ.get(declared(name), "").strip()


def data_dir() -> Path:
    """The data dir, absolute (it need not exist yet)."""
    return Path(_env(DATA_DIR_ENV) or DEFAULT_DATA_DIR).resolve()


def database_url() -> str:
    """DATABASE_URL, else the SQLite file in the data dir."""
    return _env(DATABASE_URL_ENV) or f"sqlite:///{data_dir() / SQLITE_FILE_NAME}"


def secret_key_kept() -> bool:
    """Whether the server's secret key is known without making one: SECRET_KEY is set, or
    the data dir holds the generated key."""
    return bool(_env(SECRET_KEY_ENV)) or (data_dir() / SECRET_KEY_FILE_NAME).is_file()


def is_sqlite(database: Mapping[str, Any]) -> bool:
    """``database`` is a Django DATABASES entry (ours or dj-database-url's)."""
    return str(database["ENGINE"]).endswith("sqlite3")


def is_postgresql(database: Mapping[str, Any]) -> bool:
    return str(database["ENGINE"]).endswith("postgresql")


def postgresql_server(database: Mapping[str, Any]) -> str:
    """``HOST:PORT`` of a PostgreSQL entry; an empty host is libpq's local socket."""
    host = database.get("HOST") or "local socket"
    return f"{host}:{database.get('PORT') or POSTGRESQL_DEFAULT_PORT}"


def describe_database(database: Mapping[str, Any]) -> str:
    """The database for people, never with its password: ``SQLite /path/file`` or
    ``PostgreSQL NAME on HOST:PORT``."""
    if is_sqlite(database):
        return f"SQLite {database['NAME']}"
    if is_postgresql(database):
        return f"PostgreSQL {database['NAME']} on {postgresql_server(database)}"
    return f"{database['ENGINE']} {database['NAME']}"


def bind_url(bind: str) -> str:
    """The base URL a client reaches a server on ``bind`` (gunicorn's form) at."""
    if bind.startswith(("unix:", "fd://")):
        return bind
    return f"http://{bind}/"


def own_url(public_url: str, bind: str) -> str | None:
    """The base URL, without a trailing slash, clients reach this server at:
    ``AI_MEMORY_PUBLIC_URL`` when it is set (docs/reference.md#environment-variables), else
    the address it serves on (``AI_MEMORY_BIND``); None for a socket, which no URL names."""
    if public_url:
        return public_url.rstrip("/")
    if bind.startswith(("unix:", "fd://")):
        return None
    return bind_url(bind).rstrip("/")
