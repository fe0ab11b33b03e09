"""Who may read or write which project: the one access helper every surface calls.

A project the caller may not read answers exactly like one that does not exist, so the
existence of a restricted project never leaks.
"""

from __future__ import annotations

import enum

from django.db.models import Exists, OuterRef, Q, QuerySet, Subquery

from aimemory_site.lib.errors import Code, Forbidden, NotFound
from aimemory_site.lib.principal import Principal
from projects.models import Grant, Project


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


# The attribute ``project_access`` annotates with the caller's grant level, so the
# project and the grant come in one query.
_GRANT_LEVEL = "caller_grant_level"


def _grant_level(principal: Principal, project: Project) -> str | None:
    if principal.user is None or project.access_mode == Project.AccessMode.OPEN:
        return None
    if hasattr(project, _GRANT_LEVEL):
        level: str | None = getattr(project, _GRANT_LEVEL)
        return level
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


def project_check(principal: Principal, project: Project, *, need: Level) -> None:
    """Raise unless ``principal`` holds ``need`` on ``project``.

    Without read the error is the same NotFound as for a missing project; with read but
    not write it is Forbidden.
    """
    level = project_level(principal, project, _grant_level(principal, project))
    if level >= need:
        return
    if level == Level.NONE:
        raise project_not_found(project.workspace.name, project.name)
    raise Forbidden(
        f"not authorized for {project.workspace.name}/{project.name}: you have read access "
        "and this needs write. Ask the server operator to raise your access.",
        code=Code.WRITE_ACCESS_REQUIRED,
    )


def project_access(principal: Principal, workspace: str, project: str, *, need: Level) -> Project:
    """Return the named project if ``principal`` holds ``need`` on it; never creates it.

    One query whether the project is missing, restricted or open: the caller's grant comes
    annotated, so a restricted project costs no more time than a missing one.
    """
    projects = Project.objects.select_related("workspace")
    if principal.user is not None and not principal.sees_everything:
        grants = Grant.objects.filter(user=principal.user, project=OuterRef("pk"))
        projects = projects.annotate(**{_GRANT_LEVEL: Subquery(grants.values("level")[:1])})
    try:
        found = projects.get(workspace__name=workspace, name=project)
    except Project.DoesNotExist:
        raise project_not_found(workspace, project) from None
    project_check(principal, found, need=need)
    return found


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
