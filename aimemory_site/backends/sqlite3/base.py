"""Django's SQLite backend, with writers that queue instead of polling.

SQLite admits one writer at a time. Every transaction here starts with ``BEGIN
IMMEDIATE`` (settings), so a second writer waits in SQLite's busy handler, which sleeps
and retries with growing pauses: under a few concurrent clients an unlucky writer keeps
losing and waits for seconds. Here each transaction first takes an exclusive ``flock`` on
a lock file beside the database, which the kernel hands to waiters without polling, so
writers are served one after another and the busy timeout is only a last resort (for
writes made outside a transaction, or by another program). ``flock`` covers every thread
and every process on this host that opens the same database.
"""

from __future__ import annotations

import fcntl
import os
from typing import Any

from django.db.backends.sqlite3 import base


class DatabaseWrapper(base.DatabaseWrapper):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._writer_lock_fd: int | None = None
        self._writer_lock_held = False

    def _writer_lock_path(self) -> str | None:
        name = str(self.settings_dict["NAME"])
        if not name or name == ":memory:" or name.startswith("file:"):
            return None  # an in-memory database has no other writers to queue behind
        return f"{name}.writer-lock"

    def _writer_lock_acquire(self) -> None:
        path = self._writer_lock_path()
        if path is None or self._writer_lock_held:
            return
        if self._writer_lock_fd is None:
            self._writer_lock_fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self._writer_lock_fd, fcntl.LOCK_EX)
        self._writer_lock_held = True

    def _writer_lock_release(self) -> None:
        if self._writer_lock_held and self._writer_lock_fd is not None:
            fcntl.flock(self._writer_lock_fd, fcntl.LOCK_UN)
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

    def _rollback(self) -> None:
        try:
            super()._rollback()  # type: ignore[misc]  # private in django-stubs
        finally:
            self._writer_lock_release()

    def _close(self) -> None:
        try:
            super()._close()  # type: ignore[misc]  # private in django-stubs
        finally:
            self._writer_lock_release()
            if self._writer_lock_fd is not None:
                os.close(self._writer_lock_fd)
                self._writer_lock_fd = None
