"""Open database connections that threads of this process have let go of, for the next
thread of the process that connects (docs/reference.md#waiting-and-waking).

A parked call holds no database connection, transaction or lock. Its thread used to
close its connections as it parked, and the next request on a thread without one
connected afresh: on PostgreSQL a new server process, a few milliseconds of both
machines' time. Each park cost a connect, 500 calls parking at once cost 500, and the
look after a wake waited for one. Now a thread lets go of its connections here
(``connections_let_go``) where there is room for them, and the database backends take
one from here before they connect (``spare_take``); the worker decides the room, so that
a process keeps no more connections than it did (``aimemory_site.gunicorn_worker``).

Only a connection that can serve any thread is kept: open, usable, in autocommit and
outside any transaction. A backend that can hand its connection over has
``connection_detach``, which returns the open connection and the backend's own state of
it, and leaves the wrapper as a closed one (its next query connects again); a spare
older than the database's ``CONN_MAX_AGE`` is closed when found.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from time import monotonic
from typing import Any, NamedTuple

from django.db import connections


class _Spare(NamedTuple):
    connection: Any  # the driver's connection
    state: dict[str, Any]  # what the backend knows of it (``connection_detach``)
    since: float  # when it was let go of (``monotonic()``)


_lock = threading.Lock()
_spares: dict[str, list[_Spare]] = {}  # alias -> its spares, the one let go of last last


def spares_count() -> int:
    """How many connections wait here."""
    with _lock:
        return sum(map(len, _spares.values()))


def spare_take(alias: str, max_age: float | None) -> tuple[Any, dict[str, Any]] | None:
    """A spare connection of ``alias`` and its state, the one let go of last; None if
    there is none. Spares let go of more than ``max_age`` seconds ago (None: any age)
    are closed."""
    while True:
        with _lock:
            spares = _spares.get(alias)
            if not spares:
                return None
            spare = spares.pop()
        if max_age is None or monotonic() - spare.since <= max_age:
            return spare.connection, spare.state
        with contextlib.suppress(Exception):  # already broken: it is dropped either way
            spare.connection.close()


def connections_let_go(room: Callable[[int], bool] | None = None) -> None:
    """Let go of this thread's open database connections: each one that can serve
    another thread goes to the spares while ``room(spares_count())`` says there is room
    for one more (never without ``room``), every other is closed.

    A thread inside a transaction (only a test's, which wraps each test in one) keeps its
    connections: closing one would end the transaction under the caller."""
    wrappers = connections.all(initialized_only=True)
    if any(wrapper.in_atomic_block for wrapper in wrappers):
        return
    for wrapper in wrappers:
        if wrapper.connection is None:
            continue
        detach = getattr(wrapper, "connection_detach", None)
        if detach is None or room is None or not _reusable(wrapper):
            wrapper.close()
            continue
        with _lock:
            if not room(sum(map(len, _spares.values()))):
                detach = None
            else:
                connection, state = detach()
                _spares.setdefault(wrapper.alias, []).append(_Spare(connection, state, monotonic()))
        if detach is None:
            wrapper.close()


def _reusable(wrapper: Any) -> bool:
    return bool(
        wrapper.get_autocommit()
        and not wrapper.needs_rollback
        and not wrapper.errors_occurred
        and wrapper.is_usable()
    )


def _forget_in_child() -> None:
    # A forked process must not share its parent's connections.
    global _lock, _spares
    _lock, _spares = threading.Lock(), {}


os.register_at_fork(after_in_child=_forget_in_child)
