"""Small helpers for the few statements the ORM cannot say (a guarded insert, a claim with
``RETURNING``): the columns and database values of model rows, as Django would write them.

Raw SQL stays in the service that owns its rule; these only spare it the field plumbing.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from django.db import connection, models


def insert_parts(rows: Sequence[models.Model]) -> tuple[str, str, list[list[Any]]]:
    """``(table, "col, col, ...", [[value, ...] per row])`` for rows of one model.

    Values are prepared for the current connection exactly as ``save()`` would prepare
    them (UUIDs as hex on SQLite, datetimes per backend), defaults already applied.
    """
    meta = rows[0]._meta
    fields = list(meta.concrete_fields)
    columns = ", ".join(connection.ops.quote_name(field.column) for field in fields)
    values = [
        [field.get_db_prep_save(field.pre_save(row, add=True), connection) for field in fields]
        for row in rows
    ]
    return meta.db_table, columns, values


def typed_placeholders(model: type[models.Model]) -> str:
    """``%s::type, ...`` for a row of ``model`` on PostgreSQL.

    In ``INSERT ... SELECT %s, ...`` PostgreSQL types an untyped parameter (a NULL, say)
    as text, which has no cast to uuid or bigint; naming each column's type avoids that.
    """
    return ", ".join(f"%s::{field.db_type(connection)}" for field in model._meta.concrete_fields)


def uuid_of(value: Any) -> uuid.UUID:
    """A UUID read back from raw SQL (SQLite gives 32 hex characters)."""
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


def placeholders(count: int) -> str:
    """``%s, %s, ...`` for ``count`` parameters."""
    return ", ".join(["%s"] * count)


def db_value(model: type[models.Model], field_name: str, value: Any) -> Any:
    """``value`` as the current connection stores ``model.field_name``."""
    return model._meta.get_field(field_name).get_db_prep_value(value, connection)  # type: ignore[union-attr]


def claim_oldest_sql(
    model: type[models.Model],
    *,
    assignments: Sequence[str],
    candidates: str,
    returning_extra: str = "",
) -> str:
    """The one claim-once statement (a message's pop, a handoff's delivery).

    ``UPDATE t SET <assignments> WHERE id = (SELECT id FROM t WHERE <candidates> ORDER BY
    created_at, id LIMIT 1 [FOR NO KEY UPDATE SKIP LOCKED]) AND state = %s RETURNING
    <every column><returning_extra>``. The guard on ``state`` decides the claim; on SQLite
    the write lock admits one claimer at a time, and on PostgreSQL the subquery locks its
    row (SKIP LOCKED passes over rows other claimers hold), re-checked once locked, so
    the row a caller picks is its own to claim and no caller ever has to retry. Its
    parameters: the assignments', the candidates', then the state the guard expects.
    """
    table = model._meta.db_table
    skip_locked = " FOR NO KEY UPDATE SKIP LOCKED" if connection.vendor == "postgresql" else ""
    columns = ", ".join(f"{table}.{field.column}" for field in model._meta.concrete_fields)
    return (
        f"UPDATE {table} SET {', '.join(f'{column} = %s' for column in assignments)} "
        f"WHERE id = (SELECT id FROM {table} WHERE {candidates} "
        f"ORDER BY created_at, id LIMIT 1{skip_locked}) AND state = %s "
        f"RETURNING {columns}{returning_extra}"
    )
