"""The access matrix: who reads and writes open and restricted projects (docs/operating.md#authentication)."""

from __future__ import annotations

import pytest
from pytest_django.fixtures import Settings as SettingsWrapper

from aimemory_site.lib.errors import Forbidden, NotFound
from aimemory_site.lib.principal import Principal
from projects.access import Level, project_access, readable_projects
from projects.models import Project
from tests.conftest import ApiCall, Persona

# (persona, project, expected level): anonymous and root see everything.
MATRIX = [
    ("anonymous", "commons", Level.WRITE),
    ("anonymous", "alpha", Level.WRITE),
    ("root", "commons", Level.WRITE),
    ("root", "alpha", Level.WRITE),
    ("alice", "commons", Level.WRITE),
    ("alice", "alpha", Level.WRITE),
    ("bob", "commons", Level.WRITE),
    ("bob", "alpha", Level.READ),
    ("charlie", "commons", Level.WRITE),
    ("charlie", "alpha", Level.NONE),
]


def _principal(name: str, personas: dict[str, Persona]) -> Principal:
    if name == "anonymous":
        return Principal.anonymous()
    if name == "root":
        return Principal.root()
    return personas[name].principal


@pytest.mark.parametrize(("who", "project", "expected"), MATRIX)
def test_access_matrix(
    who: str,
    project: str,
    expected: Level,
    alice: Persona,
    bob: Persona,
    charlie: Persona,
    alices_restricted: Project,
    alices_open: Project,
) -> None:
    principal = _principal(who, {"alice": alice, "bob": bob, "charlie": charlie})
    for need in (Level.READ, Level.WRITE):
        if expected >= need:
            assert project_access(principal, "default", project, need=need).name == project
        elif expected == Level.NONE:
            with pytest.raises(NotFound):
                project_access(principal, "default", project, need=need)
        else:
            with pytest.raises(Forbidden):
                project_access(principal, "default", project, need=need)
    readable = {p.name for p in readable_projects(principal)}
    assert (project in readable) is (expected >= Level.READ)


def test_unreadable_project_answers_exactly_like_a_missing_one(
    api: ApiCall, auth_on: str, charlie: Persona, alices_restricted: Project
) -> None:
    hidden = api("get", "/api/v1/briefing?workspace=default&project=alpha", token=charlie.token)
    missing = api("get", "/api/v1/briefing?workspace=default&project=nope", token=charlie.token)
    assert hidden[0] == missing[0] == 404
    assert hidden[1]["code"] == missing[1]["code"] == "project_not_found"
    assert hidden[1]["detail"].replace("alpha", "X") == missing[1]["detail"].replace("nope", "X")


def test_read_grant_cannot_write(
    api: ApiCall, auth_on: str, bob: Persona, alices_restricted: Project
) -> None:
    status, body = api(
        "post",
        "/api/v1/sessions",
        {"workspace": "default", "project": "alpha", "session_id": "s-bob"},
        token=bob.token,
    )
    assert status == 403
    assert body["code"] == "write_access_required"
    assert "read access" in body["detail"]


def test_read_grant_reads(
    api: ApiCall, auth_on: str, bob: Persona, alices_restricted: Project
) -> None:
    status, body = api("get", "/api/v1/briefing?workspace=default&project=alpha", token=bob.token)
    assert status == 200
    assert body["scope"] == {"workspace": "default", "project": "alpha", "resolved_by": "explicit"}


def test_inactive_user_reads_nothing(alice: Persona, alices_open: Project) -> None:
    alice.user.is_active = False
    alice.user.save()
    with pytest.raises(NotFound):
        project_access(alice.principal, "default", "commons", need=Level.READ)


def test_root_is_stamped_with_the_configured_name(settings: SettingsWrapper) -> None:
    settings.AI_MEMORY_ROOT_USERNAME = "ops"
    assert Principal.root().owner_name == "ops"
    settings.AI_MEMORY_ROOT_USERNAME = ""
    assert Principal.root().owner_name is None
    assert Principal.anonymous().owner_name is None
