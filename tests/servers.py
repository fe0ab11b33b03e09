"""Helpers for tests that spawn a real server process."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_healthy(url: str, proc: subprocess.Popen[bytes], deadline_s: float = 60) -> int:
    """Poll /healthz until it answers (the server is starting up), bounded in time."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            output = proc.stdout.read().decode() if proc.stdout else ""
            raise AssertionError(f"server exited with {proc.returncode}:\n{output}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                status: int = response.status
                return status
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.2)  # polling a process we do not control; no barrier exists
    raise AssertionError(f"{url} did not answer within {deadline_s}s")


def children(pid: int) -> set[int]:
    """The live child processes of ``pid``, read from /proc (psutil is not installed)."""
    found: set[int] = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # the process ended while we looked
        # The command name may hold spaces and parentheses; the fields after it may not.
        state, ppid = text[text.rindex(")") + 2 :].split()[:2]
        if int(ppid) == pid and state != "Z":
            found.add(int(stat.parent.name))
    return found


def wait_for_workers(pid: int, count: int) -> None:
    """Until gunicorn's master ``pid`` has ``count`` workers: it forks them one after
    another, with pauses, so the first may answer ``/healthz`` before the last exists."""
    deadline = time.monotonic() + 30
    while len(children(pid)) < count:
        assert time.monotonic() < deadline, f"gunicorn started {len(children(pid))} workers"
        time.sleep(0.05)  # another program's forks: there is nothing to wait on but /proc


@contextmanager
def fresh_postgres_database(prefix: str = "aimemory_serve") -> Iterator[str]:
    """A new, empty database on the PostgreSQL server of DATABASE_URL; dropped after."""
    url = urlsplit(os.environ["DATABASE_URL"])
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin_url = urlunsplit(url._replace(path="/postgres"))
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield urlunsplit(url._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
