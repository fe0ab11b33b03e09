"""Look-ups the project management commands share: a user, a project by ``WS/PROJ``."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.management.base import CommandError

from projects.models import Project


def user_named(username: str) -> User:
    user = User.objects.filter(username=username).first()
    if user is None:
        raise CommandError(f"no user {username!r}")
    return user


def project_named(coordinate: str) -> Project:
    """The project ``WS/PROJ``; it must exist (these commands never create one)."""
    workspace, _, name = coordinate.partition("/")
    project = (
        Project.objects.select_related("workspace")
        .filter(workspace__name=workspace, name=name)
        .first()
    )
    if project is None:
        raise CommandError(f"no project {coordinate!r} (give it as WORKSPACE/PROJECT)")
    return project
