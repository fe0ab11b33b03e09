"""The hot path's statements, pinned on both databases: send in three (sent in two round
trips on PostgreSQL), pop in three (two on PostgreSQL, where the claim writes its activity
row in the same statement), cancel and list in a constant few, whatever the inbox holds."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from aimemory_site.lib.principal import Principal
from messaging.models import Message
from messaging.selectors import message_list
from messaging.services import message_cancel, message_pop, message_send
from projects.models import Project
from tests.conftest import A, B

pytestmark = pytest.mark.django_db

ANONYMOUS = Principal.anonymous()
# Transaction control is not a statement of the operation (tests run inside a
# transaction, so the services' own transactions show up as savepoints).
_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE SAVEPOINT")


@contextmanager
def statements() -> Iterator[list[str]]:
    """The SQL statements run inside the block, transaction control left out."""
    found: list[str] = []
    with CaptureQueriesContext(connection) as captured:
        yield found
    found += [
        query["sql"]
        for query in captured.captured_queries
        if not query["sql"].lstrip().upper().startswith(_CONTROL)
    ]


def _send(n: int = 0) -> str:
    sent = message_send(
        principal=ANONYMOUS,
        to_workspace="default",
        to_project="project-b",
        from_workspace="default",
        from_project="project-a",
        body=f"request {n}",
    )
    return str(sent.message.id)


def _autocommit_of_each_statement(operation: Callable[[], object]) -> list[bool]:
    """Whether Django was in autocommit as each statement of ``operation`` ran."""
    autocommit: list[bool] = []

    def record(execute: Callable[..., Any], sql: str, *args: Any) -> Any:
        autocommit.append(connection.get_autocommit())
        return execute(sql, *args)

    with connection.execute_wrapper(record):
        operation()
    return autocommit


@pytest.fixture(autouse=True)
def _projects(project_a: Project, project_b: Project) -> None:
    """default/project-a sends to default/project-b."""


@pytest.mark.parametrize("already_pending", [0, 30])
def test_send_is_three_statements_in_two_round_trips_on_postgresql(already_pending: int) -> None:
    for n in range(already_pending):
        _send(n)

    with statements() as sql:
        _send()

    if connection.vendor == "postgresql":
        # The inbox lock and the guarded insert travel as one query string.
        assert len(sql) == 2, sql
        assert sql[1].count("; ") == 1 and "FOR NO KEY UPDATE; WITH" in sql[1], sql
    else:
        assert len(sql) == 3, sql


@pytest.mark.django_db(transaction=True)  # as served: no transaction around the request
def test_send_on_postgresql_runs_its_lock_and_insert_outside_a_transaction_block() -> None:
    """They are one implicit transaction of the server's: Django is in autocommit while
    they run, so no BEGIN or COMMIT goes with them."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite's send is an IMMEDIATE transaction")

    autocommit = _autocommit_of_each_statement(_send)

    assert autocommit == [True, True]  # the access query; the lock and the insert
    assert Message.objects.pending().inbox_of(Project.objects.get(name="project-b")).count() == 1


@pytest.mark.parametrize("pending", [1, 30])
def test_pop_is_three_statements_and_two_on_postgresql(pending: int) -> None:
    for n in range(pending):
        _send(n)

    with statements() as sql:
        claimed = message_pop(principal=ANONYMOUS, workspace=B["workspace"], project=B["project"])

    assert claimed is not None
    assert len(sql) == (2 if connection.vendor == "postgresql" else 3), sql


@pytest.mark.django_db(transaction=True)  # as served: no transaction around the request
@pytest.mark.parametrize("request_id", [None, "pop-1"])
def test_pop_on_postgresql_opens_a_transaction_only_to_record_a_request_id(
    request_id: str | None,
) -> None:
    """Without a request id the claim is one statement, run without BEGIN and COMMIT."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite's claim is two statements, in a transaction")
    _send()
    claimed: list[object] = []

    autocommit = _autocommit_of_each_statement(
        lambda: claimed.append(
            message_pop(
                principal=ANONYMOUS,
                workspace=B["workspace"],
                project=B["project"],
                request_id=request_id,
            )
        )
    )

    assert claimed[0] is not None
    if request_id is None:
        assert autocommit == [True, True]  # the access query; the claim with its activity
    else:
        # The access query and the request id's look-up, then in one transaction the
        # record of the request id (first, so a racing retry waits on it), the claim, and
        # the record's claimed message.
        assert autocommit == [True, True, False, False, False]


def test_pop_of_an_empty_inbox_is_two_statements() -> None:
    with statements() as sql:
        assert (
            message_pop(principal=ANONYMOUS, workspace=B["workspace"], project=B["project"]) is None
        )

    assert len(sql) == 2, sql


@pytest.mark.parametrize("pending", [1, 30])
def test_cancel_all_is_three_statements(pending: int) -> None:
    for n in range(pending):
        _send(n)

    with statements() as sql:
        assert (
            message_cancel(principal=ANONYMOUS, workspace=A["workspace"], project=A["project"])
            == pending
        )

    assert len(sql) == 3, sql


@pytest.mark.parametrize("pending", [1, 60])
@pytest.mark.parametrize(
    "listing",
    [
        lambda: message_list(principal=ANONYMOUS, workspace="default", project="project-b"),
        lambda: message_list(
            principal=ANONYMOUS, workspace="default", project="project-a", box="outbox"
        ),
    ],
    ids=["inbox", "outbox"],
)
def test_list_is_a_constant_four_statements(pending: int, listing: Callable[[], Any]) -> None:
    for n in range(pending):
        _send(n)

    with statements() as sql:
        listed = listing()

    assert len(listed) == min(pending, 50)
    assert len(sql) == 4, sql
