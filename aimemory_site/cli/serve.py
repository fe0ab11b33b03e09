"""``ai-memory serve``: migrate, collect static, then run gunicorn on AI_MEMORY_BIND."""

from __future__ import annotations

import argparse
import io
import os
import resource
import sys

from aimemory_site.cli.help_text import SubParsers, add_command
from aimemory_site.lib import wait_caps
from aimemory_site.lib.binding import is_loopback
from aimemory_site.lib.server_location import bind_url, describe_database


def add_parser(subparsers: SubParsers) -> None:
    parser = add_command(
        subparsers,
        "serve",
        summary="run the server (migrate, collect static, gunicorn)",
        paragraphs=[
            "Migrate the database, collect static files and serve with gunicorn's gevent "
            "worker: on SQLite one process per core, on PostgreSQL one per core plus one, up "
            "to 8, each serving every request at once; a call that waits (wait_seconds) "
            "holds no thread and no database connection while it is parked. An "
            "anonymous server "
            "(no AI_MEMORY_ROOT_TOKEN, no user tokens) refuses a non-loopback address unless "
            "AI_MEMORY_ALLOW_ANONYMOUS=1.",
            "Its first line says the URL, the database, the data dir and who may call. The "
            "database is DATABASE_URL, else a SQLite file in AI_MEMORY_DATA_DIR (default "
            "./var of the working directory); a PostgreSQL database must be created first "
            "(createdb NAME).",
        ],
        examples=["ai-memory serve", "ai-memory serve --bind 127.0.0.1:8000"],
    )
    parser.add_argument(
        "--bind", help="address to bind (default: $AI_MEMORY_BIND or 127.0.0.1:8000)"
    )
    parser.add_argument("--workers", type=int, help="gunicorn worker processes")
    # Accepted so that scripts written for the threaded server still start; each process
    # now serves every request at once (docs/serving.md).
    parser.add_argument("--threads", type=int, help=argparse.SUPPRESS)


#: Connections a worker takes beyond the host's waits: requests that run, clients still
#: sending theirs (2,000 trickling clients must not stop a server, docs/serving.md).
CONNECTIONS_BEYOND_WAITS = 4096
#: Open files a worker needs besides its connections (database, logs, the wake sockets).
FILES_BESIDE_CONNECTIONS = 256


def open_files_raise() -> int:
    """Raise this process's open-files limit (which gunicorn and its workers inherit) as
    far as the system allows; the limit it has now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        wanted = hard if hard != resource.RLIM_INFINITY else 1 << 20
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):
            pass
    return soft


def run(args: argparse.Namespace) -> int:
    if args.bind:
        # Settings derive ALLOWED_HOSTS from the bind address; gunicorn's workers inherit it.
        os.environ["AI_MEMORY_BIND"] = args.bind
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aimemory_site.settings")
    from aimemory_site.cli.database import make_data_dir, require_database_opens, setup_django

    # Here, not in the settings: they are also read by `ai-memory manage`, which must not
    # leave a data dir where it was run by mistake.
    make_data_dir()
    from django.conf import settings
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    setup_django()
    bind: str = args.bind or settings.AI_MEMORY_BIND

    from projects.auth import auth_enabled
    from projects.services import server_boot_record

    # migrate skips the system checks; a bad setting (AI_MEMORY_RATE_LIMIT, the webhook
    # list) must stop the server here with its message, not fail each worker's boot.
    try:
        call_command("check", fail_level="ERROR", stdout=io.StringIO())
    except SystemCheckError as exc:
        print(f"ai-memory: refusing to serve: {exc}", file=sys.stderr)
        return 2
    require_database_opens()
    _migrate()
    call_command("collectstatic", interactive=False, verbosity=0)
    if not is_loopback(bind) and not auth_enabled() and not settings.AI_MEMORY_ALLOW_ANONYMOUS:
        print(
            f"ai-memory: refusing to serve anonymously on {bind}: set AI_MEMORY_ROOT_TOKEN "
            "(or issue a user token), or AI_MEMORY_ALLOW_ANONYMOUS=1 to accept the risk.",
            file=sys.stderr,
        )
        return 2
    server_boot_record()
    from messaging.housekeeping import housekeeping_schedule

    # The background worker runs it at once, and every hour after (messaging.tasks).
    housekeeping_schedule()
    max_waits, _ = wait_caps.limits_from_environment(os.environ)
    open_files = open_files_raise()
    # A parked call holds its connection: a process may hold every wait of the host,
    # with room beside them for the requests that run and clients still sending.
    connections_per_worker = max_waits + CONNECTIONS_BEYOND_WAITS
    if open_files < connections_per_worker + FILES_BESIDE_CONNECTIONS:
        connections_per_worker = max(64, open_files - FILES_BESIDE_CONNECTIONS)
    print(
        f"ai-memory: serving {bind_url(bind)}; "
        f"database {describe_database(settings.DATABASES['default'])}; "
        f"data dir {settings.DATA_DIR}; "
        f"waits: up to {min(max_waits, connections_per_worker)} parked calls "
        f"(open files {open_files}); auth: {_auth_mode()}"
        + (
            f"; public URL {settings.AI_MEMORY_PUBLIC_URL}" if settings.AI_MEMORY_PUBLIC_URL else ""
        ),
        flush=True,
    )

    sqlite = settings.DATABASES["default"]["ENGINE"].endswith("sqlite3")
    cores = os.cpu_count() or 1
    # Chosen by measurement (docs/serving.md#why-this-design): a process serves its
    # requests one after another on the CPU, each running until it waits (on PostgreSQL,
    # for the server's answer), so a process per core keeps the cores busy; on
    # PostgreSQL one more fills the time they spend waiting for its answers.
    default_workers = min(cores, 8) if sqlite else min(cores + 1, 8)
    workers = args.workers or default_workers
    from django.db import connections

    connections.close_all()  # gunicorn forks; do not share the migration connection
    argv = [
        "-m",
        "gunicorn",
        "aimemory_site.serving.wsgi:application",
        "--config",
        "python:aimemory_site.serving.gunicorn_config",
        "--bind",
        bind,
        "--workers",
        str(workers),
        "--worker-connections",
        str(connections_per_worker),
        "--access-logfile",
        "-",
        # Several servers run by one user would share gunicorn's default control socket.
        "--no-control-socket",
        # How long a connection may take to send a request's head, or stay idle between
        # requests, before it is closed (gunicorn's keep-alive time bounds both).
        "--keep-alive",
        str(settings.AI_MEMORY_CLIENT_TIMEOUT),
        # SIGTERM answers every parked call at once (serving.gunicorn_config); what is
        # still running then has this long to finish.
        "--graceful-timeout",
        "10",
    ]
    # gunicorn starts afresh, in this process, without Django loaded: its gevent worker
    # patches the standard library when it starts, and what was made with the unpatched
    # one (Django's per-thread connections) would be shared by every greenlet.
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, *argv])


def _auth_mode() -> str:
    """Who may call, for the start line: the root token and how many users hold a live
    token, or anonymous. Precondition: the database is migrated."""
    from django.conf import settings

    from projects.auth import auth_enabled
    from projects.models import ApiToken

    holders = ApiToken.objects.filter(revoked_at__isnull=True).values("user").distinct().count()
    modes = ["root token"] if settings.AI_MEMORY_ROOT_TOKEN else []
    if holders:
        modes.append("1 user with a token" if holders == 1 else f"{holders} users with tokens")
    if modes:
        return ", ".join(modes)
    if auth_enabled():  # revoking the last token does not reopen the server
        return "on, every user token revoked"
    return "anonymous (no root token, no user tokens)"


# Any constant: the advisory lock every server on one PostgreSQL database migrates under.
_MIGRATE_LOCK = 0x61696D6D  # "aimm"


def _migrate() -> None:
    """Migrate the database. On PostgreSQL under an advisory lock: hosts starting together
    on an empty database take turns instead of racing to create the same tables (the
    loser would exit with an IntegrityError); the second finds nothing left to do."""
    from django.core.management import call_command
    from django.db import connection

    if connection.vendor != "postgresql":
        call_command("migrate", interactive=False, verbosity=0)
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", [_MIGRATE_LOCK])
        try:
            call_command("migrate", interactive=False, verbosity=0)
        finally:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [_MIGRATE_LOCK])
