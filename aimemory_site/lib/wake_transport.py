"""How a publication reaches the calls parked in the other processes and hosts
(docs/reference.md#waiting-and-waking): the transport ``lib.wakeups`` hands it to.

``transport_install`` picks one for the default database, once per serving process (the
gunicorn worker installs it after the fork). Each starts receiving lazily, when the
process's first call parks, so a process that never waits pays nothing but its
publications.

- **PostgreSQL** (any number of hosts on one database): ``LISTEN`` on
  ``wakeups.NOTIFY_CHANNEL`` on a connection of the process's own, in a daemon thread; a
  notification's payload is one topic, handed to ``wakeups.wake_deliver``. The hot path's
  writes (send, claim) send their ``pg_notify`` in their own statement, which PostgreSQL
  delivers at their commit, and publish with ``carried=True``; other publications go out
  here, as one statement after the commit. The listener reconnects after a database
  outage with a backoff (never spinning) and then sends every parked call back to look,
  since what was published meanwhile is lost.
- **SQLite** (one host, one data dir): a Unix datagram socket per listening process in
  ``<data dir>/wake/``, named by its pid. A publisher sends one datagram (the topics, as
  JSON) to every other socket there: one directory listing and a ``sendto`` each, no
  database involved, delivered in well under a millisecond. A socket whose process has
  died refuses the datagram and is removed by the publisher that found it.

A transport never raises into the write that publishes: a wake that cannot be carried is
logged, and the calls it concerned answer at their timeout at worst.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection, connections

from aimemory_site.lib import wakeups

logger = logging.getLogger(__name__)

#: How long the first parked call of a process waits for the listener's first ``LISTEN``
#: (a connect); afterwards a reconnect never holds a call back, as every parked call
#: looks again once the listener is back.
LISTEN_READY_SECONDS = 1.0
#: Backoff between reconnects of the listener while the database is down.
RECONNECT_MIN_SECONDS = 0.5
RECONNECT_MAX_SECONDS = 5.0
#: An idle listener asks the server this often whether the connection still works.
HEARTBEAT_SECONDS = 10.0
#: The kernel's bound on a socket path (sun_path), with a margin.
_SOCKET_PATH_MAX = 100


def transport_install() -> None:
    """Install the transport of the default database in ``lib.wakeups`` for this process."""
    transport: _PostgresTransport | _SocketTransport
    if connection.vendor == "postgresql":
        transport = _PostgresTransport()
    else:
        transport = _SocketTransport(wake_dir(Path(settings.DATA_DIR)))
    wakeups.transport_set(transport.send, listen=transport.listen)


class _PostgresTransport:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._ready = threading.Event()  # a LISTEN is in place now
        self._ever_ready = False

    def send(self, topics: frozenset[str]) -> None:
        """One statement on the caller's connection, after the write's commit."""
        try:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_notify(%s, t) FROM unnest(%s::text[]) AS t",
                    [wakeups.NOTIFY_CHANNEL, sorted(topics)],
                )
        except DatabaseError:
            logger.warning("could not publish a wake-up (%d topics)", len(topics), exc_info=True)

    def listen(self) -> None:
        with self._lock:
            if self._pid != os.getpid():  # never started here (a fork inherits no thread)
                self._pid = os.getpid()
                self._ready.clear()
                self._ever_ready = False
                threading.Thread(target=self._run, name="wake-listener", daemon=True).start()
        if not self._ever_ready:
            self._ready.wait(LISTEN_READY_SECONDS)

    def _run(self) -> None:
        params = _listener_params()
        backoff = RECONNECT_MIN_SECONDS
        while True:
            try:
                self._listen_on(params)
            except Exception:  # the database went away, or never came: try again later
                logger.info("wake listener lost the database; reconnecting", exc_info=True)
            self._ready.clear()
            time.sleep(backoff)
            backoff = min(RECONNECT_MAX_SECONDS, backoff * 2)

    def _listen_on(self, params: dict[str, Any]) -> None:
        import psycopg

        with psycopg.connect(**params, autocommit=True) as conn:
            conn.execute(f"LISTEN {wakeups.NOTIFY_CHANNEL}")
            self._ready.set()
            self._ever_ready = True
            # What was published before this LISTEN (a first start, an outage) may have
            # been missed: every parked call looks again.
            wakeups.wake_all()
            while True:
                for notify in conn.notifies(timeout=HEARTBEAT_SECONDS):
                    wakeups.wake_deliver([notify.payload])
                conn.execute("SELECT 1")


def _listener_params() -> dict[str, Any]:
    """Django's connection parameters for the default database, for a plain psycopg
    connection of the listener's own (TCP keepalives: a silent network ends it)."""
    params = dict(connections["default"].get_connection_params())
    for django_only in ("cursor_factory", "context", "prepare_threshold"):
        params.pop(django_only, None)
    params.setdefault("keepalives", 1)
    params.setdefault("keepalives_idle", 5)
    params.setdefault("keepalives_interval", 2)
    params.setdefault("keepalives_count", 3)
    params["application_name"] = "ai-memory wake listener"
    return params


def wake_dir(data_dir: Path) -> Path:
    """Where the processes of the server on ``data_dir`` keep their wake sockets: its
    ``wake/``, or, when that path is too long for a socket's name, a directory of the
    temporary dir named after it."""
    path = data_dir.resolve() / "wake"
    if len(str(path / "4194304.sock")) <= _SOCKET_PATH_MAX:
        return path
    digest = hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"ai-memory-wake-{digest}"


class _SocketTransport:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._own_name = ""
        self._sender: socket.socket | None = None

    def send(self, topics: frozenset[str]) -> None:
        try:
            entries = list(os.scandir(self.directory))
        except FileNotFoundError:
            return  # no process has ever waited
        if not entries:
            return
        payload = json.dumps(sorted(topics)).encode()
        sender = self._sender_socket()
        for entry in entries:
            if entry.name == self._own_name or not entry.name.endswith(".sock"):
                continue
            try:
                sender.sendto(payload, entry.path)
            except (ConnectionRefusedError, FileNotFoundError):
                with contextlib.suppress(OSError):  # its process is gone
                    Path(entry.path).unlink()
            except BlockingIOError:
                logger.warning("a wake-up was dropped: %s is not reading", entry.name)
            except OSError:
                logger.warning("could not send a wake-up to %s", entry.name, exc_info=True)

    def _sender_socket(self) -> socket.socket:
        sender = self._sender
        if sender is None or self._pid_of_sender != os.getpid():
            sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sender.setblocking(False)  # a reader that lags loses a wake, never a send
            self._sender, self._pid_of_sender = sender, os.getpid()
        return sender

    _pid_of_sender = 0

    def listen(self) -> None:
        with self._lock:
            if self._pid == os.getpid():
                return
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            name = f"{os.getpid()}.sock"
            path = self.directory / name
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # a dead process of the same pid
            receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            receiver.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
            # Bound before the first look: from here on datagrams queue for the thread.
            receiver.bind(str(path))
            self._pid, self._own_name = os.getpid(), name
        threading.Thread(
            target=_receive, args=(receiver,), name="wake-receiver", daemon=True
        ).start()


def _receive(receiver: socket.socket) -> None:
    while True:
        try:
            data = receiver.recv(1 << 20)
        except OSError:
            logger.exception("the wake receiver's socket failed; wakes stay in-process")
            return
        try:
            topics = json.loads(data)
        except ValueError:
            logger.warning("unreadable wake-up datagram: %r", data[:80])
            continue
        if isinstance(topics, list):
            wakeups.wake_deliver(str(topic) for topic in topics)
