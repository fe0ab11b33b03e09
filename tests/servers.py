"""Helpers for tests that spawn a real server process."""

from __future__ import annotations

import contextlib
import json
import os
import random
import select
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
from psycopg import sql

# Ports below the kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768-60999 by
# default), which connect() and bind(0) never hand out. A port named here and bound a moment
# later by a spawned server cannot be taken meanwhile by a client socket, ours or that of
# the other database's suite, which .ci/run runs at the same time; nor can a port named as
# one nobody listens on be listened on by the other suite's live server.
_NAMED_PORTS = range(20000, 32000)
_port_choice = random.SystemRandom()


def free_port() -> int:
    """A loopback port free at this moment, outside the kernel's ephemeral range."""
    while True:
        port = _port_choice.choice(_NAMED_PORTS)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:  # in use, or in TIME_WAIT: another
                continue
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
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.2)  # polling a process we do not control; no barrier exists
    raise AssertionError(f"{url} did not answer within {deadline_s}s")


def _child_processes(pid: int) -> set[int]:
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


def _is_background_worker(pid: int) -> bool:
    try:
        return b"db_worker" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False  # the process ended while we looked


def children(pid: int) -> set[int]:
    """The live gunicorn workers of master ``pid``: its children but the background
    worker that ``serve`` also starts (``background_workers``)."""
    return {child for child in _child_processes(pid) if not _is_background_worker(child)}


def background_workers(pid: int) -> set[int]:
    """The background worker processes (``manage db_worker``) of master ``pid``."""
    return {child for child in _child_processes(pid) if _is_background_worker(child)}


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


@contextmanager
def spawn_database_url(prefix: str) -> Iterator[str | None]:
    """On PostgreSQL runs, a fresh database on the server of DATABASE_URL; else SQLite."""
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        yield None
        return
    with fresh_postgres_database(prefix) as url:
        yield url


@contextmanager
def serving(
    data_dir: Path,
    *options: str,
    database_prefix: str,
    database_url: str | None = None,
    port: int | None = None,
    **environ: str,
) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """``ai-memory serve`` with ``options`` on a free port of 127.0.0.1 (or ``port``),
    anonymous, on the suite's kind of database (a fresh one on PostgreSQL runs, unless
    ``database_url`` names one, as several hosts of one database share it), once it
    answers ``/healthz``: its port and process. Its output goes to
    ``data_dir / "server.log"``."""
    port = free_port() if port is None else port
    env = dict(os.environ)
    for name in ("AI_MEMORY_ROOT_TOKEN", "AI_MEMORY_RATE_LIMIT", "DATABASE_URL"):
        env.pop(name, None)
    env |= {"AI_MEMORY_DATA_DIR": str(data_dir), **environ}
    argv = ["serve", "--bind", f"127.0.0.1:{port}", *options]
    database = (
        spawn_database_url(database_prefix)
        if database_url is None
        else contextlib.nullcontext(database_url)
    )
    with database as database_url:
        if database_url:
            env["DATABASE_URL"] = database_url
        data_dir.mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen(
            [sys.executable, "-m", "aimemory_site.cli.main", *argv],
            env=env,
            stdout=(data_dir / "server.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        try:
            assert wait_healthy(f"http://127.0.0.1:{port}/healthz", proc) == 200
            yield port, proc
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def client_from(source: str, **options: Any) -> httpx.Client:
    """An httpx client whose connections come from ``source``, a loopback address: to an
    anonymous server (its caps, its rate limit) each address is a caller of its own."""
    return httpx.Client(transport=httpx.HTTPTransport(local_address=source), **options)


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class RawConnection:
    """One HTTP/1.1 connection driven by hand: bytes out, whole answers in."""

    def __init__(self, port: int, source: str = "127.0.0.1") -> None:
        """Connect to ``port`` of 127.0.0.1 from ``source`` (another loopback address is
        another caller of an anonymous server)."""
        self.port = port
        self.sock = socket.create_connection(
            ("127.0.0.1", port), timeout=30, source_address=(source, 0)
        )
        self.reader = self.sock.makefile("rb")

    def close(self) -> None:
        self.reader.close()
        self.sock.close()

    def head(self, method: str, path: str, headers: dict[str, str]) -> bytes:
        lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{self.port}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_in_background(self, data: bytes) -> threading.Thread:
        """Write ``data`` from a thread while the test reads; a failed write (a reset,
        a broken pipe) is kept in ``self.send_errors``."""
        self.send_errors: list[OSError] = []

        def write() -> None:
            try:
                self.sock.sendall(data)
            except OSError as exc:
                self.send_errors.append(exc)

        writer = threading.Thread(target=write)
        writer.start()
        return writer

    def answer(self) -> Answer:
        status_line = self.reader.readline()
        assert status_line, "the server closed the connection without answering"
        headers: dict[str, str] = {}
        while (line := self.reader.readline()) not in (b"\r\n", b""):
            name, value = line.decode("latin-1").split(":", 1)
            headers[name.strip().lower()] = value.strip()
        if "content-length" in headers:
            body = self.reader.read(int(headers["content-length"]))
        else:
            assert headers.get("transfer-encoding") == "chunked", headers
            pieces = []
            while size := int(self.reader.readline(), 16):
                pieces.append(self.reader.read(size))
                self.reader.readline()
            self.reader.readline()  # the empty trailer section
            body = b"".join(pieces)
        return Answer(int(status_line.split()[1]), headers, body)

    def answered(self) -> bool:
        """Whether an answer (or the connection's end) is there to read, without waiting."""
        readable, _, _ = select.select([self.sock], [], [], 0)
        return bool(readable)

    def closed_by_server(self) -> bool:
        """True when the server ended the connection with a FIN; a reset raises."""
        return self.reader.read(1) == b""


def serving_process(server_port: int, client_port: int, among: set[int]) -> int | None:
    """Which of the processes ``among`` holds the server side of the connection from
    127.0.0.1:``client_port`` to ``server_port``, read from /proc (None if none does)."""
    inode = None
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = fields[1], fields[2]
        if local.endswith(f":{server_port:04X}") and remote.endswith(f":{client_port:04X}"):
            inode = fields[9]
    if inode is None:
        return None
    for pid in among:
        try:
            descriptors = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue  # the process ended while we looked
        for descriptor in descriptors:
            try:
                if str(descriptor.readlink()) == f"socket:[{inode}]":
                    return pid
            except OSError:
                continue  # closed while we looked
    return None
