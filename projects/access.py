"""Who may read or write which project: the one access helper every surface calls.

A project the caller may not read answers exactly like one that does not exist, so the
existence of a restricted project never leaks.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from typing import Any
from uuid import UUID

from django.db import DEFAULT_DB_ALIAS, connection
from django.db.models import Exists, OuterRef, Q, QuerySet, Subquery

from aimemory_site.lib.errors import Code, Forbidden, NotFound
from aimemory_site.lib.principal import Principal
from aimemory_site.lib.sql import uuid_of
from projects.auth import ANY_TOKEN_SQL, principal_recheck
from projects.models import Grant, Project, Workspace


class Level(enum.IntEnum):
    NONE = 0
    READ = 1
    WRITE = 2


def project_level(principal: Principal, project: Project, grant_level: str | None) -> Level:
    """Return the caller's level on ``project`` given the caller's grant on it, if any."""
    if principal.sees_everything:
        return Level.WRITE
    user = principal.user
    if user is None or not user.is_active:
        return Level.NONE
    if project.access_mode == Project.AccessMode.OPEN:
        return Level.WRITE
    if project.created_by_id == user.pk:
        return Level.WRITE
    if grant_level == Grant.Level.WRITE:
        return Level.WRITE
    if grant_level == Grant.Level.READ:
        return Level.READ
    return Level.NONE


def _grant_level(principal: Principal, project: Project) -> str | None:
    if principal.user is None or project.access_mode == Project.AccessMode.OPEN:
        return None
    return (
        Grant.objects.filter(user=principal.user, project=project)
        .values_list("level", flat=True)
        .first()
    )


def project_not_found(workspace: str, project: str) -> NotFound:
    return NotFound(
        f"project {workspace}/{project} not found. Check the workspace and project names; "
        "a project exists once an agent session started there.",
        code=Code.PROJECT_NOT_FOUND,
    )


def project_level_of(principal: Principal, project: Project) -> Level:
    """The caller's level on ``project`` (its grant looked up when one could matter)."""
    return project_level(principal, project, _grant_level(principal, project))


def project_check(principal: Principal, project: Project, *, need: Level) -> None:
    """Raise unless ``principal`` holds ``need`` on ``project``.

    Without read the error is the same NotFound as for a missing project; with read but
    not write it is Forbidden.
    """
    _level_check(principal, project, project_level_of(principal, project), need)


def _level_check(principal: Principal, project: Project, level: Level, need: Level) -> None:
    if level >= need:
        return
    if level == Level.NONE:
        raise project_not_found(project.workspace.name, project.name)
    raise Forbidden(
        f"not authorized for {project.workspace.name}/{project.name}: you have read access "
        "and this needs write. Ask the server operator to raise your access.",
        code=Code.WRITE_ACCESS_REQUIRED,
    )


def projects_access(
    principal: Principal, names: Sequence[tuple[str, str]], *, need: Level
) -> list[Project]:
    """The named projects, in order, if ``principal`` holds ``need`` on each; else raise
    for the first that fails. Never creates anything.

    One query for all of them, whether a project is missing, restricted or open: the
    caller's grant comes in the same row, so a restricted project costs what a missing
    one costs. Raw SQL because this runs on every message operation and the ORM spends
    more time compiling the join than the database spends answering it. The projects
    come with their workspaces; fields other than names, mode and creator are deferred.
    An anonymous caller not yet confirmed (``Principal.unconfirmed``) is confirmed by the
    same statement, before anything else is decided: ``principal`` may come from
    ``principal_of(request, access_confirms=True)``.
    """
    user_id = None if principal.sees_everything or principal.user is None else principal.user.pk
    grant = _GRANT_SQL if user_id is not None else "NULL"
    # An anonymous caller not yet confirmed: whether the server is open comes in the row.
    check = principal.open_server_check if principal.unconfirmed else None
    any_token = ANY_TOKEN_SQL if check is not None else "NULL"
    wanted = list(dict.fromkeys(names))
    where = " OR ".join(["(w.name = %s AND p.name = %s)"] * len(wanted))
    sql = _ACCESS_SQL.format(grant=grant, any_token=any_token, where=where)
    params: list[Any] = [user_id] if user_id is not None else []
    for workspace, project in wanted:
        params += [workspace, project]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        fetched = cursor.fetchall()
    if check is not None:
        if fetched:
            check.settle(bool(fetched[0][7]))
        else:  # no row to read it from: a closed server's 401 comes before any 404
            check.confirm()
    rows = {(row[5], row[2]): row for row in fetched}
    found = []
    for workspace, project in names:
        row = rows.get((workspace, project))
        if row is None:
            raise project_not_found(workspace, project)
        candidate = _project_from_row(row)
        # Its grant read with it: ``readable_as_loaded`` decides on this row with no query.
        setattr(candidate, _CALLER_GRANT, row[6])
        _level_check(principal, candidate, project_level(principal, candidate, row[6]), need)
        found.append(candidate)
    return found


def project_access(principal: Principal, workspace: str, project: str, *, need: Level) -> Project:
    """Return the named project if ``principal`` holds ``need`` on it; never creates it."""
    return projects_access(principal, [(workspace, project)], need=need)[0]


def project_access_again(
    principal: Principal, workspace: str, project: str, *, need: Level
) -> Principal:
    """For a call that waits, before each look after a park and at its time-out: raise
    what a new call with the same credentials would get now (401 for a revoked token,
    the 404 of a project it may no longer read, 403 for write taken away), else return
    the caller as it is now (docs/serving.md#the-loop)."""
    now = principal_recheck(principal)
    project_access(now, workspace, project, need=need)
    return now


_ACCESS_SQL = (
    f"SELECT p.id, p.workspace_id, p.name, p.access_mode, p.created_by_id, w.name, {{grant}}, "
    f"{{any_token}} "
    f"FROM {Project._meta.db_table} p JOIN {Workspace._meta.db_table} w "
    f"ON w.id = p.workspace_id WHERE {{where}}"
)
_GRANT_SQL = (
    f"(SELECT g.level FROM {Grant._meta.db_table} g WHERE g.project_id = p.id AND g.user_id = %s)"
)


def project_from_values(
    *, project_id: Any, workspace_id: Any, name: str, workspace_name: str, **more: Any
) -> Project:
    """A Project with its Workspace, from values a raw SQL statement read, as a queryset
    with ``select_related("workspace")`` would load them: ``name`` and the fields in
    ``more`` (by attribute name) are set, any other field is deferred. The ids may be
    UUIDs or, as SQLite returns them, hex text."""
    workspace_pk = uuid_of(workspace_id)
    workspace = Workspace.from_db(DEFAULT_DB_ALIAS, ["id", "name"], [workspace_pk, workspace_name])
    project = Project.from_db(
        DEFAULT_DB_ALIAS,
        ["id", "workspace_id", "name", *more],
        [uuid_of(project_id), workspace_pk, name, *more.values()],
    )
    project.workspace = workspace
    return project


def _project_from_row(row: Sequence[Any]) -> Project:
    """A Project (with its Workspace) from a row of ``_ACCESS_SQL``."""
    return project_from_values(
        project_id=row[0],
        workspace_id=row[1],
        name=row[2],
        workspace_name=row[5],
        access_mode=row[3],
        created_by_id=row[4],
    )


def readable_projects(principal: Principal) -> QuerySet[Project]:
    """Every project ``principal`` may read, as one query."""
    projects = Project.objects.select_related("workspace")
    if principal.sees_everything:
        return projects
    user = principal.user
    if user is None or not user.is_active:
        return projects.none()
    has_grant = Exists(Grant.objects.filter(user=user, project=OuterRef("pk")))
    return projects.filter(
        Q(access_mode=Project.AccessMode.OPEN) | Q(created_by=user) | Q(has_grant)
    )


def readable_among(principal: Principal, project_ids: Iterable[UUID]) -> set[UUID]:
    """Which of ``project_ids`` ``principal`` may read, in one query (none when none given).

    The rule by which every surface names another project, a message's sender above
    all: one the caller may not read goes unnamed, as one that does not exist would.
    """
    wanted = set(project_ids)
    if not wanted:
        return set()
    return set(readable_projects(principal).filter(pk__in=wanted).values_list("pk", flat=True))


# What ``projects_with_grant`` annotates each row with: the caller's grant level, or None.
_CALLER_GRANT = "caller_grant"


def projects_with_grant(principal: Principal) -> QuerySet[Project]:
    """Projects with their workspaces and, on each row, the caller's grant on it (as
    ``projects_access`` reads it), so that ``readable_as_loaded`` decides whether
    ``principal`` may read a row without a query of its own."""
    projects = Project.objects.select_related("workspace")
    user = principal.user
    if principal.sees_everything or user is None:
        return projects
    grant = Grant.objects.filter(user=user, project=OuterRef("pk")).values("level")[:1]
    return projects.annotate(**{_CALLER_GRANT: Subquery(grant)})


def readable_as_loaded(principal: Principal, project: Project) -> bool | None:
    """Whether ``principal`` may read ``project``, when that needs no query: always for
    root, an anonymous server and a caller with no user; for a row read with the caller's
    grant (``projects_with_grant``, ``projects_access``); for one whose access mode and
    creator were read, when they let the caller in without a grant (an open project, or
    the caller's own); else None (``readable_among`` then asks)."""
    if principal.sees_everything or principal.user is None:
        return project_level(principal, project, None) > Level.NONE
    if hasattr(project, _CALLER_GRANT):
        return project_level(principal, project, getattr(project, _CALLER_GRANT)) > Level.NONE
    loaded = not {"access_mode", "created_by_id"} & project.get_deferred_fields()
    if loaded and project_level(principal, project, None) > Level.NONE:
        return True
    return None
