"""POST /api/v1/sessions and GET /handoff: registering sessions, never creating on reads."""

from __future__ import annotations

import pytest

from aimemory_site.onstart.services import scope_line
from projects.models import Activity, AgentSession, Project, Workspace
from tests.conftest import ApiCall, Persona

pytestmark = pytest.mark.django_db

START = {"workspace": "default", "project": "project-a", "session_id": "sess-1", "agent": "claude"}


def test_session_start_creates_the_project_and_returns_the_block(api: ApiCall) -> None:
    status, body = api("post", "/api/v1/sessions", START)
    assert status == 200
    assert body == {
        "workspace": "default",
        "project": "project-a",
        "session_id": "sess-1",
        "context": scope_line(workspace="default", project="project-a"),
        "handoff": None,
        "brief": None,
        "pending_message_count": 0,
    }
    session = AgentSession.objects.get(session_id="sess-1")
    assert (session.project.name, session.agent) == ("project-a", "claude")


def test_session_start_is_idempotent(api: ApiCall) -> None:
    assert api("post", "/api/v1/sessions", START)[0] == 200
    first_seen = AgentSession.objects.get().last_seen_at
    assert api("post", "/api/v1/sessions", START)[0] == 200
    assert Project.objects.count() == 1
    assert Workspace.objects.count() == 1
    session = AgentSession.objects.get()
    assert session.last_seen_at >= first_seen
    assert Activity.objects.filter(kind=Activity.Kind.SESSION_STARTED).count() == 1


def test_session_start_records_the_creator(api: ApiCall, alice: Persona) -> None:
    assert api("post", "/api/v1/sessions", START, token=alice.token)[0] == 200
    assert Project.objects.get(name="project-a").created_by == alice.user


def test_session_start_needs_a_token_when_auth_is_on(api: ApiCall, auth_on: str) -> None:
    status, body = api("post", "/api/v1/sessions", START)
    assert status == 401
    assert body["code"] == "unauthorized"
    assert not Project.objects.exists()


def test_charlie_cannot_start_a_session_in_a_project_he_cannot_read(
    api: ApiCall, auth_on: str, charlie: Persona, alices_restricted: Project
) -> None:
    payload = {**START, "project": "alpha"}
    status, body = api("post", "/api/v1/sessions", payload, token=charlie.token)
    assert status == 404
    assert body["code"] == "project_not_found"
    assert not AgentSession.objects.exists()


@pytest.mark.parametrize(
    ("field", "value"),
    [("workspace", ".hidden"), ("project", "a/b"), ("project", ""), ("project", "x" * 101)],
)
def test_bad_names_are_rejected_and_nothing_is_written(
    api: ApiCall, field: str, value: str
) -> None:
    status, body = api("post", "/api/v1/sessions", {**START, field: value})
    assert status == 400
    assert body["code"] == "invalid_name"
    assert not Project.objects.exists()
    assert not Workspace.objects.exists()


def test_unknown_fields_are_a_validation_error(api: ApiCall) -> None:
    status, body = api("post", "/api/v1/sessions", {**START, "colour": "red"})
    assert status == 422
    assert body["code"] == "validation_error"
    assert "colour" in body["detail"]


def test_handoff_without_a_session_id_only_reads_the_block(api: ApiCall) -> None:
    api("post", "/api/v1/sessions", START)
    status, body = api("get", "/handoff?workspace=default&project=project-a")
    assert status == 200
    assert (body["project"], body["session_id"]) == ("project-a", "")
    assert list(AgentSession.objects.values_list("session_id", flat=True)) == ["sess-1"]


def test_handoff_with_a_new_session_id_registers_it_as_a_session_start(api: ApiCall) -> None:
    api("post", "/api/v1/sessions", START)
    status, body = api("get", "/handoff?workspace=default&project=project-a&session_id=sess-2")
    assert status == 200
    assert (body["project"], body["session_id"]) == ("project-a", "sess-2")
    session = AgentSession.objects.select_related("project").get(session_id="sess-2")
    assert (session.project.name, session.agent) == ("project-a", "other")


def test_handoff_registers_no_session_for_a_reader(
    api: ApiCall, bob: Persona, alices_restricted: Project
) -> None:
    query = {"workspace": "default", "project": "alpha", "session_id": "bobs"}
    status, body = api("get", "/handoff", query, token=bob.token)
    assert status == 200
    assert body["handoff"] is None
    assert not AgentSession.objects.exists()


@pytest.mark.parametrize("source", ["startup", "resume", "clear", "compact", "init"])
def test_session_start_takes_every_hook_source(api: ApiCall, source: str) -> None:
    status, body = api("post", "/api/v1/sessions", {**START, "source": source})
    assert status == 200, body
    assert AgentSession.objects.filter(session_id="sess-1").exists()


@pytest.mark.parametrize("source", ["fork", "", "STARTUP"])
def test_an_unknown_source_is_refused_and_nothing_is_written(api: ApiCall, source: str) -> None:
    status, body = api("post", "/api/v1/sessions", {**START, "source": source})
    assert status == 400
    assert body == {
        "detail": f"source must be one of startup, resume, clear, compact or init, got {source!r}",
        "code": "invalid_source",
    }
    assert not Project.objects.exists()
    assert not AgentSession.objects.exists()


def test_reads_never_create_a_project(api: ApiCall) -> None:
    assert api("get", "/handoff?workspace=default&project=ghost")[0] == 404
    assert api("get", "/api/v1/briefing?workspace=default&project=ghost")[0] == 404
    assert api("get", "/api/v1/messages?workspace=default&project=ghost")[0] == 404
    assert not Project.objects.exists()
    assert not Workspace.objects.exists()
