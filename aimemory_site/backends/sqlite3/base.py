"""Django's SQLite backend, with writers that take turns on a lock file, and waits that
end with the request's budget.

SQLite admits one writer at a time. Every transaction here starts with ``BEGIN
IMMEDIATE`` (settings), so a second writer waits in SQLite's busy handler, which sleeps
and retries with growing pauses of up to 100 ms, inside SQLite, where the server's gevent
worker cannot serve anything else meanwhile. Here each transaction first takes an
exclusive ``flock`` on a lock file beside the database, so the busy timeout is only a
last resort (for writes made outside a transaction, or by another program). ``flock``
covers every thread and every process on this host that opens the same database.

The callers of one process (threads, or the greenlets of a gevent worker) first wait in
a line of their own (a ``Line`` per database file, held with the file lock),
so at most one of them at a time tries for ``flock``, against the other processes: it
tries without blocking, with pauses of at most a millisecond between tries (the usual
holder is another worker's transaction of a fraction of one).

In a request, every wait ends with the request's database budget
(``aimemory_site.db_deadline``), so a writer that holds on (a stuck process, a long
command in another terminal) gets the request a 503 ``database_unavailable`` in time
rather than a hang: the line is waited in with a timeout, the file lock is tried until
the budget is spent, and the busy timeout follows what is left. Outside a request
(migrations, management commands) a writer waits its turn however long it takes, and the
busy timeout is the configured one.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
import os
import sqlite3
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from time import monotonic, sleep
from typing import Any

from django.conf import settings
from django.db.backends.sqlite3 import base

from aimemory_site.db_deadline import (
    Budget,
    DatabaseTimeout,
    connection_from_pool,
    current_budget,
)
from aimemory_site.lib.db_spares import connection_closed
from aimemory_site.lib.off_loop import off_the_loop

logger = logging.getLogger(__name__)

# The busy timeout follows the budget in steps (rounded up, so a wait may overrun the
# budget by less than one step), so that a request sets it again only after it has
# waited this long, not before every statement.
_BUSY_TIMEOUT_STEP_MS = 250
# A writer lock held by another process is tried again after pauses growing from the
# first to the longest (see _flock_polled).
_FLOCK_POLL_FIRST_PAUSE = 0.0001
_FLOCK_POLL_MAX_PAUSE = 0.001
_HELD_TOO_LONG = "another writer held the database for longer than this request can wait"


class Line:
    """A lock taken in the order it was asked for: ``release`` hands it to the caller that
    has waited longest, and no caller takes it while another waits.

    gevent's lock (what ``threading.Lock`` is under the server's worker) lets a greenlet
    that asks just as it is let go of take it before the one woken for it, which then waits
    again at the back: under a steady stream of writers one could wait hundreds of
    milliseconds while each of the others waited one transaction."""

    __slots__ = ("_guard", "_held", "_waiting")

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._held = False
        self._waiting: deque[threading.Event] = deque()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        with self._guard:
            if not self._held:
                self._held = True
                return True
            if not blocking:
                return False
            turn = threading.Event()
            self._waiting.append(turn)
        if turn.wait(None if timeout < 0 else timeout):
            return True
        with self._guard:
            if turn.is_set():  # handed over just as the wait timed out
                return True
            self._waiting.remove(turn)
            return False

    def release(self) -> None:
        with self._guard:
            if self._waiting:
                self._waiting.popleft().set()  # still held: now by the one that waited
            else:
                self._held = False

    @property
    def waiting(self) -> int:
        """How many callers wait for it now."""
        return len(self._waiting)

    def __enter__(self) -> Line:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class _ProcessLines:
    """Per database file, the line the threads of this process wait in before the file
    lock (a ``Line``, held with it): waiting in it takes a timeout, and at most one caller
    per process at a time tries for ``flock``."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Start empty; also in a forked child, where the parent's holders do not exist."""
        self._guard = threading.Lock()
        self._lines: dict[str, Line] = {}

    def of(self, path: str) -> Line:
        line = self._lines.get(path)
        if line is None:
            with self._guard:
                line = self._lines.setdefault(path, Line())
        return line


_process_lines = _ProcessLines()

# SQLite's own checkpoint (copying the WAL back into the database file, then an fsync)
# runs inside the COMMIT that takes the WAL over its threshold, while that writer still
# holds the writer lock, so every writer queued behind it waits for the copy: the tail
# of the send and pop latencies. Connections here commit with the automatic checkpoint
# off, and a thread of the process checkpoints every this many commits of its own,
# outside the lock, as PASSIVE (it never blocks a writer or a reader), and also when
# the WAL file has grown by a few MiB since it last asked, which a few large
# transactions (a bulk load) do without many commits. SQLite's default threshold is 1,000
# pages (4 MiB); a send writes about five.
CHECKPOINT_EVERY_COMMITS = 200
CHECKPOINT_EVERY_WAL_GROWTH_BYTES = 4 * 1024 * 1024
# A PASSIVE checkpoint copies what was committed when it began, while writers go on
# appending, so under steady writes it never finishes and the WAL never starts again from
# its beginning: the file grew by 170 MiB in 15 s of sends at 8 clients. Once the WAL
# holds this much, the checkpointer takes the writer lock (writers queue behind it as
# behind any writer) and runs a RESTART checkpoint, which finishes the copy so the next
# writer starts the WAL again from its beginning; the file keeps its size for reuse.
CHECKPOINT_RESTART_WAL_BYTES = 16 * 1024 * 1024
# A RESTART that holds the writer lock this long (12-21 ms seen with a 1.6 GB database on
# the bench machine) is logged: every writer waited for it, so it is where an operator
# looks first for a tail of seconds (a slow or overloaded disk).
SLOW_CHECKPOINT_SECONDS = 0.25


class _Checkpointer:
    """A daemon thread with its own connection that runs ``PRAGMA wal_checkpoint(PASSIVE)``
    when asked, and a RESTART under the writer lock once the WAL holds
    ``CHECKPOINT_RESTART_WAL_BYTES``; asking again while it runs makes one more run, not a
    queue."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Start idle; also in a forked child, where the parent's thread does not exist."""
        self._guard = threading.Lock()
        self._wanted = threading.Event()
        self._commits = 0
        self._wal_size_asked = 0  # the WAL file's size when a checkpoint was last asked for
        self._path: str | None = None
        self._thread: threading.Thread | None = None
        self.runs = 0  # finished checkpoints, for tests and logs
        self.restarts = 0  # of which ended with a RESTART under the writer lock
        self.finished = threading.Condition()
        self.last_result: tuple[int, int, int] | None = None  # (busy, wal frames, copied)

    def commit_done(self, path: str) -> None:
        # The file only grows: after a checkpoint SQLite writes it again from its start,
        # so what fits in its old size goes unseen here, which is the point: this trigger
        # bounds the file, the commit count the work behind each run.
        wal_size = _wal_size(path)
        with self._guard:
            if path != self._path or wal_size < self._wal_size_asked:
                # Another database (tests), or the WAL file was truncated or deleted and
                # begun again since the last ask: all of it is new.
                self._path = path
                self._commits = 0
                self._wal_size_asked = 0
            self._commits += 1
            grown = wal_size - self._wal_size_asked >= CHECKPOINT_EVERY_WAL_GROWTH_BYTES
            if self._commits < CHECKPOINT_EVERY_COMMITS and not grown:
                return
            self._commits = 0
            self._wal_size_asked = wal_size
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name="sqlite-checkpoint", daemon=True
                )
                self._thread.start()
        self._wanted.set()

    def _serve(self) -> None:
        connection: sqlite3.Connection | None = None
        connected_to: str | None = None
        page_size = 4096
        while True:
            self._wanted.wait()
            self._wanted.clear()
            try:
                with self._guard:
                    path = self._path
                assert path is not None
                if connection is not None and connected_to != path:
                    connection.close()
                    connection = None
                if connection is None:
                    # Used from gevent's pool threads under the server (off_the_loop),
                    # one statement at a time.
                    connection = sqlite3.connect(
                        path, timeout=5, isolation_level=None, check_same_thread=False
                    )
                    connected_to = path
                    page_size = connection.execute("PRAGMA page_size").fetchone()[0]
                # Off the worker's loop: a checkpoint copies pages and fsyncs the file,
                # which stopped every request of the process for tens of milliseconds.
                row = off_the_loop(_pragma_row, connection, "PRAGMA wal_checkpoint(PASSIVE)")
                if row[1] * page_size >= CHECKPOINT_RESTART_WAL_BYTES:  # frames in the WAL
                    row, held = _wal_restart(connection, path)
                    self.restarts += 1
                    if held >= SLOW_CHECKPOINT_SECONDS:
                        logger.info(
                            "SQLite checkpoint held the writer lock for %.0f ms "
                            "(%d pages of WAL); every writer waited",
                            held * 1000,
                            row[1],
                        )
                result = (int(row[0]), int(row[1]), int(row[2]))
            except sqlite3.Error:
                # The next commits ask again; SQLite also checkpoints when the last
                # connection to the database closes.
                logger.warning("SQLite checkpoint failed", exc_info=True)
                if connection is not None:
                    connection.close()
                connection = None
                result = None
            with self.finished:
                self.last_result = result
                self.runs += 1
                self.finished.notify_all()


checkpointer = _Checkpointer()


def _lock_file_of(path: str) -> str:
    """The writer lock file of the database file ``path``."""
    return f"{path}.writer-lock"


def _wal_size(path: str) -> int:
    try:
        # Asked after every commit: os.stat spares building and parsing a Path each time.
        return os.stat(f"{path}-wal").st_size  # noqa: PTH116
    except OSError:
        return 0


def _wal_restart(connection: sqlite3.Connection, path: str) -> tuple[tuple[Any, ...], float]:
    """``PRAGMA wal_checkpoint(RESTART)`` on ``connection`` while holding this process's
    line and the writer lock file, exactly as a writer does, so no writer appends while it
    runs; the readers it waits for (busy timeout) are single statements. Returns the
    pragma's row and how long the writer lock was held, in seconds."""
    lock_path = _lock_file_of(path)
    with _process_lines.of(lock_path):
        # Off the worker's loop: the lock is waited for, the copy fsynced.
        return off_the_loop(_restart_locked, connection, lock_path)


def _restart_locked(
    connection: sqlite3.Connection, lock_path: str
) -> tuple[tuple[Any, ...], float]:
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        taken = monotonic()
        row = _pragma_row(connection, "PRAGMA wal_checkpoint(RESTART)")
        return row, monotonic() - taken
    finally:
        os.close(fd)  # releases the lock


def _pragma_row(connection: sqlite3.Connection, pragma: str) -> tuple[Any, ...]:
    row: tuple[Any, ...] = connection.execute(pragma).fetchone()
    return row


def _after_fork_in_child() -> None:
    _process_lines.reset()
    checkpointer.reset()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _take_within(line: Line, budget: Budget) -> None:
    """Take this process's line for what is left of ``budget``, or raise DatabaseTimeout."""
    started = monotonic()
    left = budget.remaining
    taken = line.acquire(timeout=left) if left > 0 else line.acquire(blocking=False)
    budget.remaining -= monotonic() - started
    if not taken:
        raise DatabaseTimeout(_HELD_TOO_LONG)


def _flock_polled(fd: int, budget: Budget) -> bool:
    """Try for the writer lock on ``fd`` until it is held (True) or ``budget`` is spent
    (False), pausing between tries from ``_FLOCK_POLL_FIRST_PAUSE`` up to
    ``_FLOCK_POLL_MAX_PAUSE``.

    The holder is nearly always another worker of this server inside a transaction of a
    fraction of a millisecond, so the first few short pauses usually see the lock free.
    A pause is a ``time.sleep``, which under the server's gevent worker lets the process
    serve its other requests (a blocking ``flock`` would stop them all until the holder
    lets go); at most one caller per process polls, the head of the process's line.
    """
    started = monotonic()
    give_up = started + budget.remaining
    pause = _FLOCK_POLL_FIRST_PAUSE
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                pass
            if monotonic() + pause >= give_up:
                return False
            sleep(pause)
            pause = min(2 * pause, _FLOCK_POLL_MAX_PAUSE)
    finally:
        budget.remaining -= monotonic() - started


def _flock_within(fd: int, budget: Budget) -> None:
    """Take the writer lock on ``fd`` within what is left of ``budget``, or raise
    ``DatabaseTimeout``."""
    if not _flock_polled(fd, budget):
        raise DatabaseTimeout(_HELD_TOO_LONG)


@functools.lru_cache(maxsize=1024)
def _qmark_query(query: str) -> str:
    converted: str = base.FORMAT_QMARK_REGEX.sub("?", query).replace("%%", "%")
    return converted


class _BudgetedCursor(base.SQLiteCursorWrapper):
    """Django's cursor, which counts each statement's time against the request's budget
    (SQLite's busy waits happen inside statements) and names a busy wait that ran out
    ``DatabaseTimeout``: a writer outside our queue held on."""

    def execute(self, query: str, params: Any = None) -> Any:
        return self._within_budget(super().execute, query, params)

    def convert_query(self, query: str, *, param_names: list[str] | None = None) -> str:
        # Django rewrites every statement's %s to ? with a regex; the hot statements are
        # the same few strings on every request, so each is rewritten once.
        if param_names is None:
            return _qmark_query(query)
        converted: str = super().convert_query(query, param_names=param_names)  # type: ignore[misc]  # not in django-stubs
        return converted

    def executemany(self, query: str, param_list: Any) -> Any:
        return self._within_budget(super().executemany, query, param_list)

    @staticmethod
    def _within_budget(run: Callable[[str, Any], Any], query: str, params: Any) -> Any:
        budget = current_budget()
        started = monotonic() if budget is not None else 0.0
        try:
            return run(query, params)
        except sqlite3.OperationalError as exc:
            if "database is locked" in str(exc):
                raise DatabaseTimeout(*exc.args) from exc
            raise
        finally:
            if budget is not None:
                budget.remaining -= monotonic() - started


class DatabaseWrapper(base.DatabaseWrapper):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._writer_lock_fd: int | None = None
        self._writer_lock_held = False
        self._writer_lock_line: Line | None = None  # this process's, while held
        # The busy timeout set on the open connection, and the configured one, in ms.
        self._busy_timeout_ms = 0
        timeout = self.settings_dict["OPTIONS"].get("timeout", 5.0)  # sqlite3's default
        self._configured_busy_timeout_ms = int(float(timeout) * 1000)

    def _wanted_busy_timeout_ms(self) -> int:
        budget = current_budget()
        if budget is None:
            return self._configured_busy_timeout_ms
        # Rounded up to a step: a fresh budget and one barely spent ask for the same.
        steps = -(-max(0, int(budget.remaining * 1000)) // _BUSY_TIMEOUT_STEP_MS)
        return min(self._configured_busy_timeout_ms, steps * _BUSY_TIMEOUT_STEP_MS)

    def get_new_connection(self, conn_params: Any) -> Any:
        connection, spare_state = connection_from_pool(
            self.alias, self.settings_dict["CONN_MAX_AGE"], lambda: self._connect(conn_params)
        )
        if spare_state is not None:
            self._busy_timeout_ms = spare_state["busy_timeout_ms"]
        return connection

    def _connect(self, conn_params: Any) -> Any:
        self._make_database_dir(conn_params)
        wanted = self._wanted_busy_timeout_ms()
        connection = super().get_new_connection({**conn_params, "timeout": wanted / 1000})
        self._busy_timeout_ms = wanted
        if self._writer_lock_path() is not None:
            connection.execute("PRAGMA wal_autocheckpoint = 0")  # see CHECKPOINT_EVERY_COMMITS
        return connection

    @staticmethod
    def _make_database_dir(conn_params: Any) -> None:
        """Make the data dir on the first connection to a database kept in it: the
        settings no longer make it on import (``ai-memory manage`` run in the wrong place
        must leave nothing behind), so a first ``migrate`` would otherwise find no
        directory for the file. Only the data dir: a ``DATABASE_URL`` naming a directory
        that does not exist is the operator's mistake, for sqlite3's own error to say."""
        name = str(conn_params.get("database", ""))
        if not name or name == ":memory:" or name.startswith("file:"):
            return
        data_dir = Path(settings.DATA_DIR).resolve()
        if Path(name).resolve().parent == data_dir:
            with contextlib.suppress(OSError):
                data_dir.mkdir(parents=True, exist_ok=True)

    def create_cursor(self, name: Any | None = None) -> Any:
        wanted = self._wanted_busy_timeout_ms()
        if wanted != self._busy_timeout_ms:
            self.connection.execute(f"PRAGMA busy_timeout = {wanted}")
            self._busy_timeout_ms = wanted
        return self.connection.cursor(factory=_BudgetedCursor)

    def wal_finish(self) -> float:
        """Copy the whole WAL back into the database file now, so the next writer starts
        it again from its beginning: a RESTART checkpoint under the writer lock, as the
        checkpointer runs one past ``CHECKPOINT_RESTART_WAL_BYTES``. For a bulk writer
        between its transactions (the retention purge): each batch's pages are then
        copied in a checkpoint about as short as the batch, rather than left to pile up
        into one that holds every writer for long (440 ms for 40,000 pages, seen here).
        Returns how long the writer lock was held, in seconds. Inside a transaction
        (which holds the writer lock already, or would wait for this) it does nothing."""
        if self._writer_lock_path() is None or self.in_atomic_block or self._writer_lock_held:
            return 0.0
        self.ensure_connection()
        _, held = _wal_restart(self.connection, str(self.settings_dict["NAME"]))
        return held

    def _writer_lock_path(self) -> str | None:
        name = str(self.settings_dict["NAME"])
        if not name or name == ":memory:" or name.startswith("file:"):
            return None  # an in-memory database has no other writers to queue behind
        return _lock_file_of(name)

    def _writer_lock_acquire(self) -> None:
        path = self._writer_lock_path()
        if path is None or self._writer_lock_held:
            return
        if self._writer_lock_fd is None:
            self._writer_lock_fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        line = _process_lines.of(path)
        budget = current_budget()
        if budget is None:
            line.acquire()
        else:
            _take_within(line, budget)
        try:
            if budget is None:  # outside a request: waits as long as it takes, off the loop
                off_the_loop(fcntl.flock, self._writer_lock_fd, fcntl.LOCK_EX)
            else:
                _flock_within(self._writer_lock_fd, budget)
        except BaseException:
            line.release()
            raise
        self._writer_lock_line = line
        self._writer_lock_held = True

    def _writer_lock_release(self) -> None:
        if self._writer_lock_held and self._writer_lock_fd is not None:
            fcntl.flock(self._writer_lock_fd, fcntl.LOCK_UN)
        if self._writer_lock_line is not None:
            self._writer_lock_line.release()
            self._writer_lock_line = None
        self._writer_lock_held = False

    def _start_transaction_under_autocommit(self) -> None:
        self._writer_lock_acquire()
        try:
            super()._start_transaction_under_autocommit()  # type: ignore[misc]  # private in django-stubs
        except BaseException:
            self._writer_lock_release()
            raise

    def _commit(self) -> None:
        try:
            super()._commit()  # type: ignore[misc]  # private in django-stubs
        finally:
            self._writer_lock_release()
        path = self.settings_dict["NAME"]
        if self._writer_lock_path() is not None:
            checkpointer.commit_done(str(path))

    def _rollback(self) -> None:
        try:
            super()._rollback()  # type: ignore[misc]  # private in django-stubs
        finally:
            self._writer_lock_release()

    def connection_detach(self) -> tuple[Any, dict[str, Any]]:
        """The open connection and its busy timeout, for another thread's wrapper
        (``lib.db_spares``); this one is left as a closed one. Outside a transaction
        this wrapper holds no writer lock; its lock file is closed as ``_close`` does."""
        connection, self.connection = self.connection, None
        self._writer_lock_release()
        if self._writer_lock_fd is not None:
            os.close(self._writer_lock_fd)
            self._writer_lock_fd = None
        return connection, {"busy_timeout_ms": self._busy_timeout_ms}

    def _close(self) -> None:
        opened = self.connection is not None
        try:
            super()._close()  # type: ignore[misc]  # private in django-stubs
        finally:
            if opened:
                connection_closed(self.alias)
            self._writer_lock_release()
            if self._writer_lock_fd is not None:
                os.close(self._writer_lock_fd)
                self._writer_lock_fd = None
