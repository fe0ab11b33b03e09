"""The indexes a send and a claim write, pinned on both databases: every index is one more
write per row, so a foreign key that leads a composite index gets none of its own, and
keys that are often empty (sessions; the counterpart of handoff and page rows) get
partial ones."""

from __future__ import annotations

import pytest
from django.db import connection

from messaging.models import Message
from projects.models import Activity

pytestmark = pytest.mark.django_db


def _indexed_columns(table: str) -> list[tuple[str, ...]]:
    """The column lists of the table's indexes, its primary key and unique ones included."""
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, table)
    return sorted(
        tuple(spec["columns"])
        for spec in constraints.values()
        if spec["index"] or spec["primary_key"] or spec["unique"]
    )


def test_a_message_row_is_written_to_three_indexes_and_seven_partial_ones() -> None:
    """And to the search index (docs/architecture.md#data-model): on PostgreSQL one GIN
    index, on SQLite the FTS5 table its triggers write, which is no index of the table."""
    search = (
        [("to_project_id", "from_project_id", "search_vector")]
        if connection.vendor == "postgresql"
        else []
    )
    assert _indexed_columns(Message._meta.db_table) == sorted(
        [
            ("claimed_by_session_id",),  # partial: only claims made in a session
            ("created_at",),  # partial: pending questions, for the viewers they wait on
            ("created_at", "id"),  # partial: finished messages, for the retention purge
            ("expires_at",),  # partial: pending sends with an expiry, for the expiry sweep
            ("from_project_id", "idempotency_key", "idempotency_principal"),  # partial: keyed
            ("from_project_id", "state", "created_at", "id", "expires_at"),  # counts from it
            ("from_session_id",),  # partial: only sends made in a session
            ("id",),
            ("in_reply_to",),  # partial: replies, for a thread's walk down
            ("to_project_id", "state", "created_at", "id", "expires_at"),
            *search,
        ]
    )


def test_an_activity_row_is_written_to_two_indexes_and_a_partial_one() -> None:
    assert _indexed_columns(Activity._meta.db_table) == [
        ("counterpart_id",),  # partial: handoff and page rows have none
        ("id",),
        ("project_id", "created_at"),
    ]
