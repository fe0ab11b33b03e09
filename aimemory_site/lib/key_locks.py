"""A lock named by a key, held across statements that commit on their own: one holder at
a time in every process and on every host that shares the database.

For a rule that a read decides and a later write must not contradict, where the write is
a service that runs its own transaction (whether a question was answered already, then
the send of the answer). Where a unique constraint or a guarded statement can decide a
race, they do; this is for where none can.

- PostgreSQL: an advisory lock of the session, named by a 64-bit digest of the key. A
  connection that closes lets go of it.
- SQLite (one host): ``flock`` on one file beside the database, for every key; an
  in-memory database has one process, and a lock of the process does.

Waiting never blocks the process: it tries, and pauses with ``time.sleep`` between tries,
which the server's gevent worker turns into a switch to its other requests.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import threading
from collections.abc import Iterator
from time import monotonic, sleep

from django.db import connection

# Pauses between tries grow from the first to the longest: a holder keeps the lock for
# a few statements, so the first short pauses usually see it free.
_FIRST_PAUSE = 0.001
_LONGEST_PAUSE = 0.02

_in_memory_lock = threading.Lock()


class KeyLockTimeout(TimeoutError):
    """Another holder kept the lock for longer than the caller would wait."""


@contextlib.contextmanager
def key_lock(key: str, *, timeout: float) -> Iterator[None]:
    """Hold the lock named ``key`` while the block runs; raise ``KeyLockTimeout`` when
    it is not free within ``timeout`` seconds. Not reentrant: a block must not take the
    lock it holds. On SQLite all keys share one lock."""
    if connection.vendor == "postgresql":
        with _advisory_lock(key, timeout):
            yield
        return
    name = str(connection.settings_dict["NAME"])
    if not name or name == ":memory:" or name.startswith("file:"):
        if not _in_memory_lock.acquire(timeout=timeout):
            raise KeyLockTimeout(f"lock {key} is held by another caller")
        try:
            yield
        finally:
            _in_memory_lock.release()
        return
    with _file_lock(f"{name}.key-lock", key, timeout):
        yield


def _polled(attempt: Iterator[bool], key: str, timeout: float) -> None:
    """Run ``attempt`` until a try takes the lock, pausing between tries."""
    give_up = monotonic() + timeout
    pause = _FIRST_PAUSE
    while not next(attempt):
        if monotonic() + pause >= give_up:
            raise KeyLockTimeout(f"lock {key} is held by another caller")
        sleep(pause)
        pause = min(2 * pause, _LONGEST_PAUSE)


@contextlib.contextmanager
def _advisory_lock(key: str, timeout: float) -> Iterator[None]:
    number = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), signed=True)

    def tries() -> Iterator[bool]:
        while True:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_try_advisory_lock(%s)", [number])
                yield bool(cursor.fetchone()[0])

    _polled(tries(), key, timeout)
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [number])


@contextlib.contextmanager
def _file_lock(path: str, key: str, timeout: float) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:

        def tries() -> Iterator[bool]:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    yield False
                else:
                    yield True

        _polled(tries(), key, timeout)
        yield
    finally:
        os.close(fd)  # lets go of the lock
