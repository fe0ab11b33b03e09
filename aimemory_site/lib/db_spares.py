"""Open database connections that requests of this process have let go of, for the next
request of the process that connects (docs/serving.md#database-connections): the
process's connection pool.

The server runs each request in a greenlet of its own, and Django keeps a connection per
greenlet, so a connection outlives its request only here. A request lets go of its
connections when it is answered, and a call lets go of its own before it parks (a
parked call holds no database connection, transaction or lock): each goes here while
fewer than ``SPARES_KEPT`` wait, else it is closed. The database backends take one from
here before they connect (``spare_take``), which on PostgreSQL spares a connect (a new
server process, a few milliseconds of both machines' time) per request.

Only a connection that can serve any request is kept: open, usable, in autocommit and
outside any transaction. A backend that can hand its connection over has
``connection_detach``, which returns the open connection and the backend's own state of
it, and leaves the wrapper as a closed one (its next query connects again); a spare
older than the database's ``CONN_MAX_AGE`` is closed when found, and the backend checks
a spare again as it takes it (a database that restarted meanwhile closed it).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from time import monotonic
from typing import Any, NamedTuple

from django.db import connections

#: Connections kept per database for the next request; more are closed. A process runs
#: its requests' database work one at a time on SQLite, and on PostgreSQL as many at a
#: time as it has requests awaiting the server's answers; the bench's 32 clients on three
#: processes keep about this many busy in each.
SPARES_KEPT = 8


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


def spare_take(
    alias: str, max_age: float | None, usable: Callable[[Any], bool] | None = None
) -> tuple[Any, dict[str, Any]] | None:
    """A spare connection of ``alias`` and its state, the one let go of last; None if
    there is none. Spares let go of more than ``max_age`` seconds ago (None: any age),
    and those ``usable`` says are not, are closed."""
    while True:
        with _lock:
            spares = _spares.get(alias)
            if not spares:
                return None
            spare = spares.pop()
        fresh = max_age is None or monotonic() - spare.since <= max_age
        if fresh and (usable is None or usable(spare.connection)):
            return spare.connection, spare.state
        with contextlib.suppress(Exception):  # already broken: it is dropped either way
            spare.connection.close()


def connections_let_go() -> None:
    """Let go of this request's open database connections: each one that can serve
    another request goes to the spares while fewer than ``SPARES_KEPT`` of its database
    wait there, every other is closed.

    A caller inside a transaction (only a test's, which wraps each test in one) keeps its
    connections: closing one would end the transaction under the caller."""
    wrappers = connections.all(initialized_only=True)
    if any(wrapper.in_atomic_block for wrapper in wrappers):
        return
    for wrapper in wrappers:
        if wrapper.connection is None:
            continue
        detach = getattr(wrapper, "connection_detach", None)
        if detach is None or not _reusable(wrapper):
            wrapper.close()
            continue
        with _lock:
            spares = _spares.setdefault(wrapper.alias, [])
            if len(spares) < SPARES_KEPT:
                connection, state = detach()
                spares.append(_Spare(connection, state, monotonic()))
                continue
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
