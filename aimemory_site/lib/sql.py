"""Small helpers for the few statements the ORM cannot say (a guarded insert, a claim with
``RETURNING``): the columns and database values of model rows, as Django would write them.

Raw SQL stays in the service that owns its rule; these only spare it the field plumbing.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connection, models

_M = TypeVar("_M", bound=models.Model)


def insert_parts(rows: Sequence[models.Model]) -> tuple[str, str, list[list[Any]]]:
    """``(table, "col, col, ...", [[value, ...] per row])`` for rows of one model.

    Values are prepared for the current connection exactly as ``save()`` would prepare
    them (UUIDs as hex on SQLite, datetimes per backend), defaults already applied.
    """
    table, columns, plan = _insert_plan(type(rows[0]), connection.vendor)
    if plan is None:
        fields = rows[0]._meta.concrete_fields
        return (
            table,
            columns,
            [
                [
                    field.get_db_prep_save(field.pre_save(row, add=True), connection)
                    for field in fields
                ]
                for row in rows
            ],
        )
    values = []
    for row in rows:
        row_values = []
        for attname, prepare in plan:
            value = getattr(row, attname)
            row_values.append(value if value is None or prepare is None else prepare(value))
        values.append(row_values)
    return table, columns, values


def insert_columns(model: type[models.Model]) -> tuple[str, str]:
    """``(table, "col, col, ...")`` of ``model``, in the order of ``insert_parts``."""
    table, columns, _ = _insert_plan(model, connection.vendor)
    return table, columns


# Fields whose database value is the Python value itself, for the values a model instance
# holds (str, int, bool): ``get_db_prep_save`` only re-checks their type. Preparing every
# field through Django cost a fifth of a send; the plan skips it where it is the identity.
_PLAIN_FIELDS = (models.CharField, models.TextField, models.IntegerField, models.BooleanField)

_Plan = tuple[tuple[str, Callable[[Any], Any] | None], ...]


@functools.cache
def _insert_plan(model: type[models.Model], vendor: str) -> tuple[str, str, _Plan | None]:
    """The table, the column list and, per column, its attribute and how to prepare a
    non-null value of it (None: as it is) on ``vendor``; no plan for a model with a field
    that sets its own value on save (``auto_now``), which takes Django's way."""
    meta = model._meta
    columns = ", ".join(connection.ops.quote_name(field.column) for field in meta.concrete_fields)
    plan: list[tuple[str, Callable[[Any], Any] | None]] = []
    for field in meta.concrete_fields:
        if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
            return meta.db_table, columns, None
        target = field.target_field if isinstance(field, models.ForeignKey) else field
        prepare: Callable[[Any], Any] | None
        if isinstance(target, _PLAIN_FIELDS):
            prepare = None
        elif isinstance(target, models.UUIDField):
            prepare = None if connection.features.has_native_uuid_field else _uuid_hex
        else:
            prepare = functools.partial(_prepare, field)
        plan.append((field.attname, prepare))
    return meta.db_table, columns, tuple(plan)


def _uuid_hex(value: uuid.UUID) -> str:
    return value.hex


def _prepare(field: models.Field[Any, Any], value: Any) -> Any:
    return field.get_db_prep_save(value, connection)


def typed_placeholders(model: type[models.Model], instead: dict[str, str] | None = None) -> str:
    """``%s::type, ...`` for a row of ``model`` on PostgreSQL; ``instead`` gives an
    expression for some columns (by attribute name), which then take no parameter.

    In ``INSERT ... SELECT %s, ...`` PostgreSQL types an untyped parameter (a NULL, say)
    as text, which has no cast to uuid or bigint; naming each column's type avoids that.
    """
    instead = instead or {}
    return ", ".join(
        instead.get(field.attname, f"%s::{field.db_type(connection)}")
        for field in model._meta.concrete_fields
    )


def insert_values_sql(model: type[models.Model], rows: int = 1) -> str:
    """``INSERT INTO t (col, ...) VALUES (%s, ...), ...`` for ``rows`` rows of ``model``,
    in the column order of ``insert_parts``; built once per model, count and database."""
    return _insert_values_sql(model, rows, connection.vendor)


@functools.cache
def _insert_values_sql(model: type[models.Model], rows: int, vendor: str) -> str:
    table, columns = insert_columns(model)
    row = f"({placeholders(len(model._meta.concrete_fields))})"
    return f"INSERT INTO {table} ({columns}) VALUES {', '.join([row] * rows)}"


def uuid_of(value: Any) -> uuid.UUID:
    """A UUID read back from raw SQL (SQLite gives 32 hex characters)."""
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


def placeholders(count: int) -> str:
    """``%s, %s, ...`` for ``count`` parameters."""
    return ", ".join(["%s"] * count)


def db_value(model: type[models.Model], field_name: str, value: Any) -> Any:
    """``value`` as the current connection stores ``model.field_name``."""
    return _field(model, field_name).get_db_prep_value(value, connection)


@functools.cache
def _field(model: type[models.Model], field_name: str) -> models.Field[Any, Any]:
    field = model._meta.get_field(field_name)
    assert isinstance(field, models.Field)
    return field


def select_columns(model: type[models.Model], alias: str) -> str:
    """``alias.col, ...`` for every concrete column of ``model``, in ``_meta`` order (what
    ``model_from_row`` reads)."""
    return ", ".join(
        f"{alias}.{connection.ops.quote_name(field.column)}"
        for field in model._meta.concrete_fields
    )


def model_from_row(model: type[_M], row: Sequence[Any]) -> tuple[_M, Sequence[Any]]:
    """A ``model`` instance from a raw row that starts with its concrete columns in
    ``_meta`` order (as ``RETURNING`` of ``claim_oldest_sql`` gives them), and the rest of
    the row. Values pass the converters a queryset would apply (SQLite's datetimes and
    UUIDs, JSON); ``Model.objects.raw`` does the same at several times the cost."""
    attnames, plan = _read_plan(model, connection.vendor)
    values = []
    for value, (column, converters) in zip(row, plan, strict=False):
        for convert in converters:
            value = convert(value, column, connection)
        values.append(value)
    return model.from_db(DEFAULT_DB_ALIAS, attnames, values), row[len(plan) :]


@functools.cache
def _read_plan(
    model: type[models.Model], vendor: str
) -> tuple[list[str], tuple[tuple[Any, tuple[Callable[..., Any], ...]], ...]]:
    """Per concrete field: its column expression and the converters of a read on
    ``vendor`` (the backend's, then the field's), as Django's compiler picks them."""
    meta = model._meta
    plan = []
    for field in meta.concrete_fields:
        column = field.get_col(meta.db_table)
        converters = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
        plan.append((column, tuple(converters)))
    return [field.attname for field in meta.concrete_fields], tuple(plan)


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


def compiled_where(queryset: models.QuerySet[Any]) -> tuple[str, list[Any]]:
    """The ``WHERE`` condition of a filtered single-table ``queryset`` and its
    parameters, as this connection runs them, for a raw statement on the same table
    (an ``UPDATE ... RETURNING``, which the ORM cannot say): the queryset stays the one
    spelling of the condition. Columns are qualified with the table's name."""
    query = queryset.query
    if sum(1 for count in query.alias_refcount.values() if count) > 1:
        raise ValueError("compiled_where takes a queryset of one table, without joins")
    compiler = query.get_compiler(connection=connection)
    where, params = compiler.compile(query.where)
    return where, list(params)
