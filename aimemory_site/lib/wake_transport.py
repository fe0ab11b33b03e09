"""How a publication reaches the calls parked in the other processes and hosts
(docs/reference.md#waiting-and-waking): the transport ``lib.wakeups`` hands it to.

``transport_install`` picks one for the default database, once per serving process (the
gunicorn worker installs it after the fork). Each receives only while a call of the
process waits, so a process with none pays nothing but its publications (once one that
had waited kept receiving, every publication cost every process).

- **PostgreSQL** (any number of hosts on one database): ``LISTEN``/``NOTIFY`` on two
  connections of the process's own, served by a daemon thread, on ``WAKE_CHANNELS``
  channels, each topic on one of them by its digest (``wake_channel``). A publication is
  one ``pg_notify`` statement on the publisher (its payload is the publication's number
  and the topic, ``publication_payload``), sent by the publishing thread after its write
  committed, whose answer is read before the next statement. A call that waits has its
  topics' channels ``LISTEN``ed on the listener before its first look; the thread hands
  each notification to ``wakeups.wake_deliver`` (which wakes only the calls waiting on
  that topic) and ``UNLISTEN``s a channel once no call of the process waits on it. So a
  process hears only the publications of the channels its parked calls wait on, and its
  thread wakes for little else (on one channel for all, every process with a parked call
  woke for every send).
  A fixed number of channels, not one per topic: each channel a process listens on
  holds an advisory lock (``listener_mark``), and PostgreSQL's lock table is shared by
  the whole server (``max_locks_per_transaction`` times ``max_connections``: 6,400 by
  default); 10,000 calls parked on as many inboxes filled it, and every ``LISTEN`` then
  failed. And with thousands of channels, each parked call cost a ``LISTEN`` and an
  ``UNLISTEN`` on the process's one listener; with ``WAKE_CHANNELS`` they are listened
  on once and stay.
- **SQLite** (one host, one data dir): a Unix datagram socket per listening process in
  ``<data dir>/wake/``, bound under a hidden name, and linked into a directory per topic
  (``wake/<topic digest>/<pid>.sock``) while a call of the process waits on that topic. A
  publisher lists the directory of each topic it publishes and sends one datagram (the
  publication's number and the topics, as JSON) to each process found there: a listing and
  a ``sendto`` each, none at all for a topic no one waits on, no database involved,
  delivered in well under a millisecond. (With one directory for all, every send reached
  every process with a parked call, and its receiver thread woke and took the GIL for
  nothing: sends at 0.88 of their rate with 500 calls parked.) A socket whose process has
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
import select
import socket
import tempfile
import threading
import time
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection, connections

from aimemory_site.lib import wakeups

logger = logging.getLogger(__name__)

#: The prefix of the PostgreSQL channels of topics (``wake_channel``).
CHANNEL_PREFIX = "aimemory_wake_"
#: How many channels the topics share (``wake_channel``): a process listens on at most
#: this many, and holds as many advisory locks of the server's shared lock table (with
#: eight processes a host, 2,048 of the default 6,400). A write to a topic that shares its
#: channel with a listened one publishes for nothing, which costs a statement after its
#: commit and a wake of the listening processes' threads, nothing more.
WAKE_CHANNELS = 256
#: The first key of the advisory locks that mark a channel listened to (``listener_mark``):
#: "aimw", apart from any other advisory lock of the database.
LISTENER_MARK_CLASS = 0x61696D77
#: Publications a process queues at most while its connection is down; more are dropped
#: (the calls they concerned answer at their timeout).
MAX_QUEUED_TOPICS = 10_000
#: How long the first parked call of a process waits for the transport's first
#: connection; afterwards a reconnect never holds a call back, as every parked call looks
#: again once the connection is back.
LISTEN_READY_SECONDS = 1.0
#: Backoff between reconnects of the transport while the database is down.
RECONNECT_MIN_SECONDS = 0.5
RECONNECT_MAX_SECONDS = 5.0
#: The longest the transport waits for a connection.
CONNECT_SECONDS = 3.0
#: The longest a statement of the transport waits for the server's answer.
STATEMENT_SECONDS = 1.0
#: An idle transport asks the server this often whether the connection still works,
#: reading with it the answer of the last publication if still due: a publication sent
#: into a connection that broke just then goes out again this late at the latest.
HEARTBEAT_SECONDS = 2.0
#: The kernel's bound on a socket path (sun_path), with a margin.
_SOCKET_PATH_MAX = 100


def transport_install() -> None:
    """Install the transport of the default database in ``lib.wakeups`` for this process."""
    transport: _PostgresTransport | _SocketTransport
    if connection.vendor == "postgresql":
        transport = _PostgresTransport()
    else:
        transport = _SocketTransport(wake_dir(Path(settings.DATA_DIR)))
    wakeups.transport_set(
        transport.send,
        listen=transport.listen,
        unlisten=transport.unlisten,
        unheard_sql=unheard_sql if isinstance(transport, _PostgresTransport) else None,
    )


def wake_channel(topic: str) -> str:
    """The PostgreSQL channel of ``topic``: one of ``WAKE_CHANNELS``, by the first byte of
    the topic's MD5 digest, which SQL can take too (``unheard_sql``); nothing secret
    rides on it."""
    digest = hashlib.md5(topic.encode(), usedforsecurity=False).hexdigest()
    return f"{CHANNEL_PREFIX}{digest[:2]}"


def listener_mark(channel: str) -> int:
    """The key, with ``LISTENER_MARK_CLASS``, of the shared advisory lock a process holds
    on its listener while it ``LISTEN``s ``channel``: the channel's number."""
    return int(channel[len(CHANNEL_PREFIX) :], 16)


def unheard_sql(topic_sql: str) -> str:
    """An SQL condition for a write's own statement on PostgreSQL: true when no process
    listens for the topic ``topic_sql`` (an SQL expression) evaluates to, so that the
    write need not publish it (docs/hot-path.md#serving-parked-calls).

    Every process that ``LISTEN``s a channel holds its mark (``listener_mark``) shared,
    from before its ``LISTEN`` to after its ``UNLISTEN``, and a call takes it before its
    first look. The condition takes the mark exclusively if it is free and holds it to
    the write's commit, so a call that starts to wait meanwhile takes its mark only once
    the write has committed, and its first look finds what it wrote. If the mark is held,
    the write publishes after its commit, as every write did before."""
    mark = f"('x' || substr(md5({topic_sql}), 1, 2))::bit(8)::int"
    return f"pg_try_advisory_xact_lock({LISTENER_MARK_CLASS}, {mark})"


class _PostgresTransport:
    """Two libpq connections of the process's own, and a thread that keeps them: connects,
    reconnects, hands each notification to ``wakeups.wake_deliver`` and ``UNLISTEN``s
    the channels no call waits on any more.

    A publication is sent by the publishing thread itself on the first connection, the
    publisher, as one short statement (no thread hop: waking the thread for each write
    cost more than the statement); while the connection is down it is queued for the
    thread. A waiting call ``LISTEN``s itself, on the second, the listener, so that the
    ``LISTEN`` is in place before its first look. The thread watches only the listener's
    socket: on one connection, every publication's answer woke it in every process with
    a parked call, and 500 parked pops cost sends a tenth of their rate."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # this object's state
        # Each connection has its lock: libpq's connections are not thread-safe.
        self._conn_lock = threading.Lock()
        self._conn: Any = None  # the publisher, set by the thread while it works
        self._listener_lock = threading.Lock()
        self._listener: Any = None  # the listener, set by the thread while it works
        self._pid: int | None = None
        # Topic -> the number of its publication queued last.
        self._pending: dict[str, int | None] = {}
        # The topics of the publication sent last whose answer has not been read (held
        # with the publisher's lock): queued again if it turns out to have failed.
        self._unanswered: dict[str, int | None] = {}
        self._poke_read = self._poke_write = -1
        # Channel -> how many calls of the process wait on it (held with the lock).
        self._wanted: dict[str, int] = {}
        # The channels LISTENed on the listener now (held with the listener's lock).
        self._listened: set[str] = set()
        self._ever_connected = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.connects = 0  # how many times the thread has connected

    def send(self, topics: frozenset[str], publication: int | None = None) -> None:
        """NOTIFY ``topics`` of ``publication`` now, or queue them for the thread if the
        publisher is down.

        The statement is sent, not waited for: its answer is read before the
        connection's next statement, and if it failed, its topics are queued again for
        the reconnected thread. Waiting for it cost every send and pop a round trip."""
        with self._lock:
            self._started()
        published: dict[str, int | None] = dict.fromkeys(topics, publication)
        with self._conn_lock:
            conn = self._conn
            if conn is not None:
                try:
                    _answer_read(conn)  # the previous publication's, long arrived
                    self._unanswered = {}
                    _send_on(conn, *_notify_statement(published))
                    self._unanswered = published
                    return
                except Exception:
                    logger.info("a wake-up could not be sent; reconnecting", exc_info=True)
                    self._conn = None  # the thread, poked below, connects again
                    published = self._unanswered | published
                    self._unanswered = {}
        with self._lock:
            if len(self._pending) < MAX_QUEUED_TOPICS:
                self._pending |= published
        self._poke()

    def listen(self, topics: frozenset[str]) -> None:
        """Receive the publications of ``topics`` from now on, until as many
        ``unlisten``: returns once their channels are ``LISTEN``ed, or the listener is
        down (the thread ``LISTEN``s them once it is back, and every parked call then
        looks again)."""
        channels = {wake_channel(topic) for topic in topics}
        with self._lock:
            self._started()
            for channel in channels:
                self._wanted[channel] = self._wanted.get(channel, 0) + 1
        if not self._ever_connected.is_set():
            self._ever_connected.wait(LISTEN_READY_SECONDS)
        with self._listener_lock:
            listener = self._listener
            new = channels - self._listened
            if listener is None or not new:
                return
            try:
                _run_on(listener, _listen_statement("LISTEN", new))
                _deliver_queued(listener)
            except Exception:
                logger.info("could not LISTEN; reconnecting", exc_info=True)
                self._listener, self._listened = None, set()
                self._poke()
                return
            self._listened |= new

    def unlisten(self, topics: frozenset[str]) -> None:
        """The end of a ``listen`` of ``topics``: the thread ``UNLISTEN``s the channels no
        call of the process waits on any more."""
        unwanted = False
        with self._lock:
            if self._pid != os.getpid():
                return
            for channel in {wake_channel(topic) for topic in topics}:
                left = self._wanted.get(channel, 0) - 1
                if left > 0:
                    self._wanted[channel] = left
                elif self._wanted.pop(channel, None) is not None:
                    unwanted = True
        if unwanted:
            self._poke()

    def stop(self) -> None:
        """End the thread and close its connections (tests; a server's process just exits)."""
        with self._lock:
            self._stopping.set()
            thread = self._thread
        if thread is not None:
            self._poke()
            thread.join(timeout=10)

    def _started(self) -> None:
        """Start the thread in this process if it has none yet (a fork inherits none).
        Called with the lock held."""
        if self._pid == os.getpid():
            return
        self._pid = os.getpid()
        self._conn = self._listener = None
        self._pending = {}
        self._conn_lock, self._listener_lock = threading.Lock(), threading.Lock()
        self._poke_read, self._poke_write = os.pipe()
        os.set_blocking(self._poke_read, False)
        os.set_blocking(self._poke_write, False)
        self._wanted, self._listened = {}, set()
        self._ever_connected.clear()
        self._thread = threading.Thread(target=self._run, name="wake-transport", daemon=True)
        self._thread.start()

    def _poke(self) -> None:
        with contextlib.suppress(BlockingIOError):  # the pipe is full: the thread is due
            os.write(self._poke_write, b"\0")

    def _taken(self) -> dict[str, int | None]:
        with self._lock:
            published, self._pending = self._pending, {}
        return published

    def _run(self) -> None:
        params = _listener_params()
        backoff = RECONNECT_MIN_SECONDS
        while not self._stopping.is_set():
            connected_at = time.monotonic()
            try:
                self._serve(params)
            except Exception:  # the database went away, or never came: try again later
                logger.info("wake transport lost the database; reconnecting", exc_info=True)
            if self._stopping.is_set():
                return
            if time.monotonic() - connected_at > RECONNECT_MAX_SECONDS:
                backoff = RECONNECT_MIN_SECONDS  # it had been working: no outage to wait out
            time.sleep(backoff)
            backoff = min(RECONNECT_MAX_SECONDS, backoff * 2)

    def _serve(self, params: dict[str, Any]) -> None:
        # libpq through psycopg's thin layer, not a psycopg connection: a publication then
        # costs its thread a few tens of microseconds, not a quarter of a millisecond.
        from psycopg.conninfo import make_conninfo

        conninfo = make_conninfo(**params).encode()
        conn = _connect(conninfo)
        listener = None
        try:
            self.connects += 1
            # A NOTIFY holds a lock of the whole server until its transaction's commit
            # is flushed: not waiting for the flush keeps it short. Nothing is lost by
            # it: notifications are never written to disk anyway.
            _run_on(conn, b"SET synchronous_commit = off")
            listener = _connect(conninfo)
            with self._listener_lock:
                with self._lock:
                    wanted = set(self._wanted)
                if wanted:
                    _run_on(listener, _listen_statement("LISTEN", wanted))
                self._listener, self._listened = listener, wanted
            with self._conn_lock:
                self._conn = conn
            self._ever_connected.set()
            # What was published before these LISTENs (a first start, an outage) may have
            # been missed: every parked call looks again.
            wakeups.wake_all()
            self._serve_connected(conn, listener)
        finally:
            with self._listener_lock:
                if self._listener is listener:
                    self._listener, self._listened = None, set()
                if listener is not None:
                    listener.finish()
            with self._conn_lock:
                if self._conn is conn:
                    self._conn = None
                    lost, self._unanswered = self._unanswered, {}
                    with self._lock:
                        self._pending |= lost
                conn.finish()

    def _serve_connected(self, conn: Any, listener: Any) -> None:
        from psycopg import OperationalError

        # poll, not select: a busy worker's descriptors run past select's 1024.
        poller = select.poll()
        poller.register(self._poke_read, select.POLLIN)
        poller.register(listener.socket, select.POLLIN)
        heartbeat_at = time.monotonic() + HEARTBEAT_SECONDS
        while not self._stopping.is_set():
            if self._conn is not conn or self._listener is not listener:
                raise OperationalError("a statement found a connection broken")
            beat = time.monotonic() >= heartbeat_at
            with self._listener_lock:
                with self._lock:
                    unwanted = {c for c in self._listened if c not in self._wanted}
                    everything = len(unwanted) == len(self._listened)
                if unwanted:
                    _run_on(
                        listener,
                        b"UNLISTEN *; SELECT pg_advisory_unlock_all()"
                        if everything
                        else _listen_statement("UNLISTEN", unwanted),
                    )
                    self._listened -= unwanted
                elif beat:  # a connection that broke quietly raises
                    _run_on(listener, b"SELECT 1")
                listener.consume_input()  # raises once the connection is gone
                _deliver_queued(listener)
            # Either statement reads the last publication's answer first: one that
            # failed is queued again (the publisher is then found broken and remade).
            published = self._taken()
            if published:
                with self._conn_lock:
                    self._statement_run(conn, *_notify_statement(published))
            elif beat:
                with self._conn_lock:
                    self._statement_run(conn, b"SELECT 1")
            if beat:
                heartbeat_at = time.monotonic() + HEARTBEAT_SECONDS
            ready = poller.poll(max(0.0, heartbeat_at - time.monotonic()) * 1000)
            if any(fd == self._poke_read for fd, _ in ready):
                with contextlib.suppress(BlockingIOError):
                    os.read(self._poke_read, 4096)

    def _statement_run(self, conn: Any, sql: bytes, params: list[bytes] | None = None) -> None:
        """``_run_on`` on the publisher, which reads the last publication's answer too.
        Called with the publisher's lock held."""
        _run_on(conn, sql, params)
        self._unanswered = {}


def _deliver_queued(conn: Any) -> None:
    """Hand on the notifications libpq has read (during a statement, too: the socket
    will not show those to the thread's poll)."""
    while (notify := conn.notifies()) is not None:
        topic, publication = publication_parse(notify.extra.decode())
        wakeups.wake_deliver([topic], publication)


def _connect(conninfo: bytes) -> Any:
    """A libpq connection, made without holding the GIL while it waits (libpq's blocking
    connect does hold it: a connect to a stalled server froze the whole process), within
    ``CONNECT_SECONDS``."""
    from psycopg import OperationalError, pq

    conn = pq.PGconn.connect_start(conninfo)
    deadline = time.monotonic() + CONNECT_SECONDS
    while True:
        if conn.status == pq.ConnStatus.BAD:
            failure = conn.get_error_message()
            conn.finish()
            raise OperationalError(failure)
        state = conn.connect_poll()
        if state == pq.PollingStatus.OK:
            return conn
        if state == pq.PollingStatus.FAILED:
            failure = conn.get_error_message()
            conn.finish()
            raise OperationalError(failure)
        waiting = select.poll()  # the socket may change between attempts at several hosts
        waiting.register(
            conn.socket, select.POLLIN if state == pq.PollingStatus.READING else select.POLLOUT
        )
        left = deadline - time.monotonic()
        if left <= 0 or not waiting.poll(left * 1000):
            conn.finish()
            raise OperationalError(f"no connection to the database within {CONNECT_SECONDS} s")


def _notify_statement(published: Mapping[str, int | None]) -> tuple[bytes, list[bytes]]:
    """``SELECT pg_notify($1, $2), pg_notify($3, $4), ...`` of the ``published`` topics
    (each on its channel, with ``publication_payload`` of its publication's number), and
    its parameters."""
    calls = ", ".join(f"pg_notify(${n}, ${n + 1})" for n in range(1, 2 * len(published), 2))
    params = [
        part.encode()
        for topic, publication in published.items()
        for part in (wake_channel(topic), publication_payload(topic, publication))
    ]
    return f"SELECT {calls}".encode(), params


def publication_payload(topic: str, publication: int | None) -> str:
    """A notification's payload: ``"<publication> <topic>"``, or the topic alone for a
    publication without a number (no topic begins with a digit)."""
    return topic if publication is None else f"{publication} {topic}"


def publication_parse(payload: str) -> tuple[str, int | None]:
    """The topic and publication number of a ``publication_payload``."""
    number, space, topic = payload.partition(" ")
    if space and number.isdigit():
        return topic, int(number)
    return payload, None


def _listen_statement(command: str, channels: AbstractSet[str]) -> bytes:
    """``LISTEN a; LISTEN b; ...`` (or ``UNLISTEN``) of ``channels``, one round trip, with
    their marks (``listener_mark``): taken before a ``LISTEN``, let go after an
    ``UNLISTEN``. Their names are ``wake_channel``'s, so they need no quoting."""
    ordered = sorted(channels)
    marks = ", ".join(
        f"pg_advisory_{'lock' if command == 'LISTEN' else 'unlock'}_shared("
        f"{LISTENER_MARK_CLASS}, {listener_mark(channel)})"
        for channel in ordered
    )
    listens = "; ".join(f"{command} {channel}" for channel in ordered)
    if command == "LISTEN":
        return f"SELECT {marks}; {listens}".encode()
    return f"{listens}; SELECT {marks}".encode()


def _run_on(conn: Any, sql: bytes, params: list[bytes] | None = None) -> None:
    """Run one statement on a libpq connection and read its answer (and first the one
    still due from a statement sent before, ``_send_on``); raise OperationalError if
    either failed or the server sent nothing back within ``STATEMENT_SECONDS``."""
    _answer_read(conn)
    _send_on(conn, sql, params)
    _answer_read(conn)


def _send_on(conn: Any, sql: bytes, params: list[bytes] | None = None) -> None:
    """Send one statement on a libpq connection whose answers have all been read; its
    answer is read by ``_answer_read``."""
    if params is None:
        conn.send_query(sql)
    else:
        conn.send_query_params(sql, params)


def _answer_read(conn: Any) -> None:
    """Read the answer of the statement sent last on ``conn``, if it is still due; raise
    OperationalError if it failed or did not come within ``STATEMENT_SECONDS`` (a
    publisher must not hang on a stalled database: its write has committed and its
    answer is due)."""
    from psycopg import OperationalError, pq

    if conn.transaction_status != pq.TransactionStatus.ACTIVE:
        if conn.status == pq.ConnStatus.BAD:
            raise OperationalError(conn.get_error_message())
        return  # nothing is due
    conn.consume_input()  # raises once the connection is gone
    if conn.is_busy():
        readable = select.poll()
        readable.register(conn.socket, select.POLLIN)
        if not readable.poll(STATEMENT_SECONDS * 1000):
            raise OperationalError(f"the database did not answer within {STATEMENT_SECONDS} s")
    # The answer has begun to arrive; the rest of so short an answer is in its packet.
    failure = None
    while (result := conn.get_result()) is not None:
        if result.status not in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK):
            failure = conn.get_error_message()
    if failure is not None:
        raise OperationalError(failure)


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
    params["application_name"] = "ai-memory wake transport"
    return params


def wake_dir(data_dir: Path) -> Path:
    """Where the processes of the server on ``data_dir`` keep their wake sockets: its
    ``wake/``, or, when that path is too long for a socket's name, a directory of the
    temporary dir named after it."""
    path = data_dir.resolve() / "wake"
    if len(str(path / topic_digest("") / "4194304.sock")) <= _SOCKET_PATH_MAX:
        return path
    digest = hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"ai-memory-wake-{digest}"


def topic_digest(topic: str) -> str:
    """The name of ``topic``'s directory in the wake dir: of fixed length, whatever the
    topic (a session id runs to 200 characters)."""
    return hashlib.blake2b(topic.encode(), digest_size=8).hexdigest()


class _SocketTransport:
    """The process's datagram socket, bound once as ``.<pid>.sock`` in the wake dir, and
    hard-linked as ``<topic digest>/<pid>.sock`` while a call of the process waits on
    that topic; a thread receives what is sent to it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._own_name = ""
        self._sender: socket.socket | None = None
        # Topic digest -> how many calls of the process wait on it (held with the lock).
        self._wanted: dict[str, int] = {}

    def send(self, topics: frozenset[str], publication: int | None = None) -> None:
        """Send ``topics`` of ``publication`` to every other process with a call waiting
        on one of them."""
        # A process's name -> a link to its socket, and the topics it hears: one
        # datagram to each, however many of its topics this publishes.
        heard_by: dict[str, tuple[str, list[str]]] = {}
        for topic in topics:
            try:
                entries = list(os.scandir(self.directory / topic_digest(topic)))
            except FileNotFoundError:
                continue  # no call waits on it
            for entry in entries:
                if entry.name != self._own_name and entry.name.endswith(".sock"):
                    heard_by.setdefault(entry.name, (entry.path, []))[1].append(topic)
        if not heard_by:
            return
        sender = self._sender_socket()
        for path, heard in heard_by.values():
            try:
                datagram = {"publication": publication, "topics": sorted(heard)}
                sender.sendto(json.dumps(datagram).encode(), path)
            except FileNotFoundError:
                pass  # its last call waiting on the topic has just left
            except ConnectionRefusedError:
                with contextlib.suppress(OSError):  # its process is gone
                    Path(path).unlink()
            except BlockingIOError:
                logger.warning("a wake-up was dropped: %s is not reading", path)
            except OSError:
                logger.warning("could not send a wake-up to %s", path, exc_info=True)

    def _sender_socket(self) -> socket.socket:
        sender = self._sender
        if sender is None or self._pid_of_sender != os.getpid():
            sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sender.setblocking(False)  # a reader that lags loses a wake, never a send
            self._sender, self._pid_of_sender = sender, os.getpid()
        return sender

    _pid_of_sender = 0

    def listen(self, topics: frozenset[str]) -> None:
        """Receive the publications of ``topics`` from now on, until as many
        ``unlisten``: the socket is linked into each topic's directory before the
        caller's first look, from when datagrams queue for the thread."""
        with self._lock:
            if self._pid != os.getpid():
                self._bind()
            for digest in map(topic_digest, topics):
                self._wanted[digest] = self._wanted.get(digest, 0) + 1
                if self._wanted[digest] == 1:
                    self._link(digest)

    def unlisten(self, topics: frozenset[str]) -> None:
        """The end of a ``listen``: a topic no call of the process waits on any more is
        unlinked, and publishers send here no more for it."""
        with self._lock:
            if self._pid != os.getpid():
                return
            for digest in map(topic_digest, topics):
                count = self._wanted.get(digest, 0)
                if count > 1:
                    self._wanted[digest] = count - 1
                    continue
                self._wanted.pop(digest, None)
                if count:
                    with contextlib.suppress(FileNotFoundError):
                        (self.directory / digest / self._own_name).unlink()
                    with contextlib.suppress(OSError):  # another process's link is there
                        (self.directory / digest).rmdir()

    def _link(self, digest: str) -> None:
        """Link the socket as ``<digest>/<pid>.sock``. Called with the lock held."""
        topic_dir = self.directory / digest
        for _attempt in range(5):
            # Another process's unlisten may remove the directory between the two steps.
            topic_dir.mkdir(mode=0o700, exist_ok=True)
            try:
                os.link(self.directory / f".{self._own_name}", topic_dir / self._own_name)
                return
            except FileNotFoundError:
                continue
            except FileExistsError:
                (topic_dir / self._own_name).unlink()  # a dead process of the same pid's
        logger.warning("could not link the wake socket under %s", topic_dir)

    def _bind(self) -> None:
        """Bind this process's socket, under its hidden name, and start its receiver.
        Called with the lock held."""
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        name = f"{os.getpid()}.sock"
        stale = self.directory / f".{name}"  # a dead process of the same pid
        with contextlib.suppress(FileNotFoundError):
            stale.unlink()
        _dead_sockets_remove(self.directory, os.getpid())
        receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        receiver.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        receiver.bind(str(stale))
        self._pid, self._own_name = os.getpid(), name
        self._wanted = {}
        threading.Thread(
            target=_receive, args=(receiver,), name="wake-receiver", daemon=True
        ).start()


def _dead_sockets_remove(directory: Path, own_pid: int) -> None:
    """Remove the sockets and links of processes that have ended, and those left by a
    dead process of ``own_pid``, with topic directories left empty (publishers also
    remove the links they find refused)."""

    def ended(name: str) -> bool:
        pid = name.removeprefix(".").removesuffix(".sock")
        if not name.endswith(".sock") or not pid.isdigit():
            return False
        if int(pid) == own_pid:
            return True
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass  # another user's live process
        return False

    for entry in os.scandir(directory):
        if entry.is_dir(follow_symlinks=False):
            for link in os.scandir(entry.path):
                if ended(link.name):
                    with contextlib.suppress(FileNotFoundError):
                        Path(link.path).unlink()
            with contextlib.suppress(OSError):  # not empty, or gone already
                Path(entry.path).rmdir()
        elif entry.name.startswith(".") and ended(entry.name):
            with contextlib.suppress(FileNotFoundError):
                Path(entry.path).unlink()


def _receive(receiver: socket.socket) -> None:
    while True:
        try:
            data = receiver.recv(1 << 20)
        except OSError:
            logger.exception("the wake receiver's socket failed; wakes stay in-process")
            return
        try:
            datagram = json.loads(data)
            topics = datagram["topics"]
            publication = datagram["publication"]
        except (ValueError, TypeError, KeyError):
            logger.warning("unreadable wake-up datagram: %r", data[:80])
            continue
        if isinstance(topics, list) and (publication is None or isinstance(publication, int)):
            wakeups.wake_deliver((str(topic) for topic in topics), publication)
