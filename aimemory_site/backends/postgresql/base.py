"""Django's PostgreSQL backend, whose waits on the server end with the request's budget.

psycopg runs every exchange with the server (a query, a fetch, a commit) through
``Connection.wait``, which takes a timeout that nothing passes.
``DeadlineConnection`` passes what is left of the request's database budget
(``aimemory_site.db_deadline``), so a server that accepted the connection and then fell
silent (a stalled host, a hung proxy, a full disk) cannot hold a request: the wait gives
up on the request's own thread, the connection is closed (its protocol state is
unknowable once an answer is abandoned) and ``DatabaseTimeout`` reaches the 503 answer.
Django drops the closed connection at the end of the request (``CONN_HEALTH_CHECKS``, whose
check here asks the socket instead of the server: ``DatabaseWrapper.is_usable``), and the
next request connects afresh: recovery needs no restart. A new connection gets a
``connect_timeout`` within the budget too.

Nothing changes outside a request: a migration or a management command waits on the
server as long as it must.
"""

from __future__ import annotations

import select
from time import monotonic
from typing import Any, TypeVar

import psycopg
from django.db.backends.postgresql import base
from django.utils.functional import cached_property
from psycopg.abc import PQGen
from psycopg.pq import ConnStatus, TransactionStatus

from aimemory_site.db_deadline import (
    DatabaseTimeout,
    TimeoutTranslatingErrors,
    connection_from_pool,
    current_budget,
)
from aimemory_site.lib.db_spares import connection_closed

RV = TypeVar("RV")

# libpq (and psycopg) never wait less than 2 s for a connect: with less left, do not try.
_MIN_CONNECT_SECONDS = 2


class _DeadlinePassed(psycopg.OperationalError):
    """psycopg's side of ``DatabaseTimeout``: the server did not answer within the budget."""


class DeadlineConnection(psycopg.Connection[Any]):
    """A psycopg connection whose waits on the server end with the request's budget."""

    def wait(self, gen: PQGen[RV], interval: float = 0.1, timeout: float | None = None) -> RV:
        budget = current_budget()
        if budget is None:
            return super().wait(gen, interval, timeout)
        left = budget.remaining
        if left <= 0:
            # Nothing was sent yet (the generator has not started): the connection is intact.
            raise _DeadlinePassed("the request's time for the database is used up")
        bounded = left if timeout is None else min(timeout, left)
        started = monotonic()
        try:
            return super().wait(gen, interval, bounded)
        except psycopg.errors._WaitTimeout:  # psycopg asks its callers to convert it
            if timeout is not None and timeout <= left:
                raise  # the caller's own, shorter timeout
            # The server may still answer what was sent: nothing can use this line again.
            self.close()
            raise _DeadlinePassed(
                f"the database did not answer within {bounded:.1f}s; the connection was closed"
            ) from None
        finally:
            budget.remaining -= monotonic() - started


class _PsycopgWithDeadlines:
    """The psycopg module as Django's backend uses it (``DatabaseWrapper.Database``), except
    that ``connect()`` makes a ``DeadlineConnection``."""

    connect = DeadlineConnection.connect

    def __getattr__(self, name: str) -> Any:
        return getattr(psycopg, name)


def _is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, _DeadlinePassed | psycopg.errors.ConnectionTimeout)


class DatabaseWrapper(base.DatabaseWrapper):
    Database = _PsycopgWithDeadlines()

    @cached_property
    def wrap_database_errors(self) -> TimeoutTranslatingErrors:
        return TimeoutTranslatingErrors(self, _is_timeout)

    def get_new_connection(self, conn_params: Any) -> Any:
        connection, _ = connection_from_pool(
            self.alias,
            self.settings_dict["CONN_MAX_AGE"],
            lambda: self._connect_within_budget(conn_params),
            usable=connection_usable,
        )
        return connection

    def _connect_within_budget(self, conn_params: Any) -> Any:
        budget = current_budget()
        if budget is None:
            return super().get_new_connection(conn_params)
        configured = float(conn_params.get("connect_timeout") or budget.remaining)
        seconds = int(min(configured, budget.remaining))
        if seconds < _MIN_CONNECT_SECONDS:
            raise DatabaseTimeout("too little of the request's time is left to connect")
        started = monotonic()
        try:
            return super().get_new_connection({**conn_params, "connect_timeout": seconds})
        finally:
            budget.remaining -= monotonic() - started

    def connection_detach(self) -> tuple[Any, dict[str, Any]]:
        """The open connection, for another request's wrapper (``lib.db_spares``); this
        one is left as a closed one."""
        connection, self.connection = self.connection, None
        return connection, {}

    def _close(self) -> None:
        opened = self.connection is not None
        try:
            super()._close()  # type: ignore[misc]  # private in django-stubs
        finally:
            if opened:
                connection_closed(self.alias)

    def is_usable(self) -> bool:
        """Whether the open connection can serve another request, told without asking
        the server.

        Django's check (``CONN_HEALTH_CHECKS``, at each request's first query) is a
        ``SELECT 1``: a round trip of every request, a sixth of a pop's. A connection the
        server has closed (a restart, a terminated backend, a proxy gone) has something
        to read while idle, the server's last error or the end of the stream, where one
        in good order has nothing; psycopg already knows one that broke mid-exchange. So
        either is unusable, and Django replaces it before the request uses it. A server
        that hangs without closing goes unseen here, as it did until ``SELECT 1`` timed
        out: the request's budget ends that wait (``DeadlineConnection``).
        """
        return self.connection is not None and connection_usable(self.connection)


def connection_usable(connection: psycopg.Connection[Any]) -> bool:
    """Whether ``connection`` can serve a request, told without asking the server
    (``DatabaseWrapper.is_usable``); also asked of a spare as it is taken."""
    if connection.broken or connection.closed:
        return False
    pgconn = connection.pgconn
    if pgconn.status != ConnStatus.OK or pgconn.transaction_status in (
        TransactionStatus.INERROR,
        TransactionStatus.UNKNOWN,
    ):
        return False
    try:
        readable, _, _ = select.select([pgconn.socket], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return False
    return not readable
