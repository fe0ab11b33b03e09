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
from collections import deque
from collections.abc import Callable
from time import monotonic
from typing import Any, NamedTuple

from django.db import connections

#: Connections kept per database for the next request; more are closed. As many as a
#: worker may hold open (``serving.gunicorn_config.OPEN_CONNECTIONS_PER_WORKER``): with
#: fewer, a worker at its limit closed connections it let go of and opened them again
#: for the next requests, a tenth of its CPU with 10,000 calls parked on PostgreSQL.
SPARES_KEPT = 12


class _Spare(NamedTuple):
    connection: Any  # the driver's connection
    state: dict[str, Any]  # what the backend knows of it (``connection_detach``)
    since: float  # when it was let go of (``monotonic()``)


class _Turn:
    """A request waiting in line for a connection: when its turn comes it is handed a
    spare, or (``spare`` left None) the place of a connection closed, to connect in."""

    __slots__ = ("ready", "spare")

    def __init__(self) -> None:
        self.ready = threading.Event()
        self.spare: _Spare | None = None


class _Pool:
    """The spares of each database, how many connections of it are open, and the
    requests waiting for one, first come first served."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spares: dict[str, list[_Spare]] = {}  # the one let go of last, last
        self.open: dict[str, int] = {}
        self.line: dict[str, deque[_Turn]] = {}


_pool = _Pool()
#: Connections of one database a process may hold open at once; None: no bound
#: (``open_limit_set``).
_open_limit: int | None = None


def open_limit_set(limit: int | None) -> None:
    """Bound the connections of each database this process holds open at once (in use
    and spare): past it, a request waits in line for one within its database budget
    (``db_deadline``), else answers 503. Set by the server, where every request gives
    its connections back when it is answered; unbounded elsewhere (tests' threads keep
    theirs)."""
    global _open_limit
    _open_limit = limit


def spares_count() -> int:
    """How many connections wait here."""
    with _pool.lock:
        return sum(map(len, _pool.spares.values()))


def open_count(alias: str) -> int:
    """How many connections of ``alias`` this process holds open, in use or spare."""
    with _pool.lock:
        return _pool.open.get(alias, 0)


def spare_take(
    alias: str,
    max_age: float | None,
    usable: Callable[[Any], bool] | None = None,
    wait_seconds: float | None = None,
) -> tuple[Any, dict[str, Any]] | None:
    """A spare connection of ``alias`` and its state, the one let go of last; or None,
    and then the caller connects, and must call ``connection_closed`` when that
    connection is closed (or the connect fails). Spares let go of more than ``max_age``
    seconds ago (None: any age), and those ``usable`` says are not, are closed (and the
    caller connects in their place).

    With the process at its open limit, or others already waiting, it waits in line up
    to ``wait_seconds`` for a connection to be let go of or closed (None: it does not
    wait, and connects past the limit), then raises ``TimeoutError``. In line, not in a
    scramble: under a burst of thousands, a request woken by a release lost it to one
    that had just arrived, again and again, until its budget ran out."""
    with _pool.lock:
        line = _pool.line.setdefault(alias, deque())
        spares = _pool.spares.get(alias)
        turn = None
        if not line and spares:
            spare: _Spare | None = spares.pop()
        elif (
            wait_seconds is None
            or _open_limit is None
            or (not line and _pool.open.get(alias, 0) < _open_limit)
        ):
            _pool.open[alias] = _pool.open.get(alias, 0) + 1
            spare = None
        else:
            turn = _Turn()
            line.append(turn)
    if turn is not None:
        spare = _turn_awaited(alias, turn, wait_seconds or 0.0)
    if spare is None:
        return None
    fresh = max_age is None or monotonic() - spare.since <= max_age
    if fresh and (usable is None or usable(spare.connection)):
        return spare.connection, spare.state
    with contextlib.suppress(Exception):  # already broken: it is dropped either way
        spare.connection.close()
    return None  # its place is the caller's, to connect in


def _turn_awaited(alias: str, turn: _Turn, seconds: float) -> _Spare | None:
    """What ``turn`` is handed (a spare, or None: a place to connect in), once it is."""
    if not turn.ready.wait(seconds):
        with _pool.lock:
            if not turn.ready.is_set():  # not handed anything meanwhile
                _pool.line[alias].remove(turn)
                raise TimeoutError(
                    f"all {_open_limit} database connections of this process stayed in use"
                )
    return turn.spare


def connection_closed(alias: str) -> None:
    """A connection of ``alias`` that ``spare_take`` counted was closed (or never opened):
    its place goes to the first in line, or is free."""
    with _pool.lock:
        line = _pool.line.get(alias)
        if line:
            line.popleft().ready.set()
            return
        _pool.open[alias] = max(0, _pool.open.get(alias, 0) - 1)


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
        with _pool.lock:
            line = _pool.line.get(wrapper.alias)
            spares = _pool.spares.setdefault(wrapper.alias, [])
            if line or len(spares) < SPARES_KEPT:
                connection, state = detach()
                spare = _Spare(connection, state, monotonic())
                if line:  # straight to the first in line
                    turn = line.popleft()
                    turn.spare = spare
                    turn.ready.set()
                else:
                    spares.append(spare)
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
    global _pool
    _pool = _Pool()


os.register_at_fork(after_in_child=_forget_in_child)
