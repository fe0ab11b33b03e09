"""One time budget for the database waits of a request (docs/reference.md#limits-and-faults).

A database that stops answering must not hold a request: every route answers 503
``database_unavailable`` within 5 s. ``DatabaseDeadlineMiddleware`` gives each request
``REQUEST_DATABASE_SECONDS`` of database waiting in total, and our backends spend it:

- PostgreSQL (``aimemory_site.backends.postgresql``): every wait of psycopg on the server's
  socket (a query, a fetch, a commit, the health check) is given what is left, and a
  connect gets a ``connect_timeout`` within it. A server that accepts and then stays
  silent is cut off client-side, on the request's own thread: no watchdog thread and no
  server-side ``statement_timeout``, which a silent server would never apply.
- SQLite (``aimemory_site.backends.sqlite3``): the writer queue (``flock``) and SQLite's
  busy timeout wait at most what is left.

A wait that runs out raises ``DatabaseTimeout`` (an ``OperationalError``), which
``MachineErrorMiddleware`` answers with the 503; ``/healthz`` names it ``"timeout"``. A
PostgreSQL connection whose answer was abandoned is closed, and Django drops it at the end
of the request (``CONN_HEALTH_CHECKS``), so the server heals by itself as soon as the
database answers again; on SQLite nothing is broken, the next writer simply gets its turn.

Known slack: SQLite's busy timeout follows the budget in 250 ms steps (a wait may overrun
by less than one), and a PostgreSQL ``DATABASE_URL`` naming several hosts (or a name with
several addresses) gets the connect timeout once per address, as psycopg tries them in
turn.

Outside a request (migrations, management commands, ``ai-memory serve`` before gunicorn
starts) there is no budget: a long migration takes the time it needs.

Under ``ai-memory serve`` a request starts as soon as it has arrived (each in a
greenlet of the gevent worker, docs/serving.md), so the budget counts from the
middleware, and a request stuck on the database gives up after at most
``REQUEST_DATABASE_SECONDS`` plus the time to render its 503. Waits that are not on the
database carry their own bounds (admission webhooks: ``timeout_ms``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from time import monotonic
from types import TracebackType
from typing import Any

from django.db import OperationalError
from django.db.utils import DatabaseErrorWrapper
from django.http import HttpRequest, HttpResponse

from aimemory_site.lib.db_spares import connection_closed, spare_take

# Well under the 5 s of docs/reference.md#limits-and-faults: what is left covers the 503 itself.
REQUEST_DATABASE_SECONDS = 3.0


class DatabaseTimeout(OperationalError):
    """The database did not answer within the time allowed (it may be stalled, or
    locked by a writer that holds on). Every backend raises this class for every wait
    that ran out."""


class Budget:
    """Seconds of database waiting a request has left. Owned by one thread."""

    __slots__ = ("remaining",)

    def __init__(self, seconds: float) -> None:
        self.remaining = seconds  # the backends subtract each wait as it ends


_state = threading.local()


def current_budget() -> Budget | None:
    """The budget of the request this thread is serving; None outside a request."""
    budget: Budget | None = getattr(_state, "budget", None)
    return budget


@contextmanager
def database_budget(seconds: float = REQUEST_DATABASE_SECONDS) -> Iterator[Budget]:
    """Bound the database waits of this thread, in total, to ``seconds`` while open."""
    previous = current_budget()
    budget = Budget(seconds)
    _state.budget = budget
    try:
        yield budget
    finally:
        _state.budget = previous


class DatabaseDeadlineMiddleware:
    """Give every request ``REQUEST_DATABASE_SECONDS`` of database waiting in total.

    First in ``MIDDLEWARE``, so that the waits of every other middleware (sessions, the
    user, the rate limit) count too. Django's own connection checks around a request
    (``close_old_connections``) run outside it and are bounded by the backends.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        with database_budget():
            return self.get_response(request)


def connection_from_pool(
    alias: str,
    max_age: float | None,
    connect: Callable[[], Any],
    usable: Callable[[Any], bool] | None = None,
) -> tuple[Any, dict[str, Any] | None]:
    """For a backend's ``get_new_connection``: a spare of ``alias`` and its state
    (``lib.db_spares``), else ``connect()``'s new connection and None. With the process
    at its open limit, waits for a connection at most what is left of the request's
    budget (outside a request it does not wait), then raises ``DatabaseTimeout``; the
    new connection is counted open until the backend reports it closed
    (``connection_closed``)."""
    budget = current_budget()
    started = monotonic()
    try:
        wait = None if budget is None else max(0.0, budget.remaining)
        spare = spare_take(alias, max_age, usable, wait_seconds=wait)
    except TimeoutError as exc:
        raise DatabaseTimeout(str(exc)) from None
    finally:
        if budget is not None:
            budget.remaining -= monotonic() - started
    if spare is not None:
        return spare
    try:
        return connect(), None
    except BaseException:
        connection_closed(alias)  # counted, never opened
        raise


class TimeoutTranslatingErrors(DatabaseErrorWrapper):
    """Django's translation of driver errors (``wrap_database_errors``), which also raises
    ``DatabaseTimeout`` for a driver error that ``is_timeout`` recognises as one."""

    wrapper: Any  # the DatabaseWrapper, set by Django's __init__ (missing in django-stubs)

    def __init__(self, wrapper: Any, is_timeout: Callable[[BaseException], bool]) -> None:
        super().__init__(wrapper)
        self.is_timeout = is_timeout

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc_value is None:
            return  # the common case, first and cheap: this runs around every call
        if self.is_timeout(exc_value):
            self.wrapper.errors_occurred = True  # the connection may be gone: check it
            raise DatabaseTimeout(*exc_value.args).with_traceback(traceback) from exc_value
        super().__exit__(exc_type, exc_value, traceback)
