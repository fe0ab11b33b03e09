"""A session id belongs to the principal that first registered it (docs/reference.md#scope-resolution)."""

from __future__ import annotations

import pytest

from messaging.models import Message
from projects.models import Activity, AgentSession, Project
from tests.conftest import SEND, ApiCall, Persona, make_project
from tests.mcp_raw import RawMcp

pytestmark = pytest.mark.django_db

ALICES_SESSION = {"workspace": "acme", "project": "secretproj", "session_id": "sess-alice"}


@pytest.fixture
def alices_session(api: ApiCall, alice: Persona, bob: Persona) -> AgentSession:
    """alice works in her restricted acme/secretproj; an open acme/openproj exists too."""
    secret = make_project(alice, "acme", "secretproj", restricted=True)
    make_project(alice, "acme", "openproj")
    assert api("post", "/api/v1/sessions", ALICES_SESSION, token=alice.token)[0] == 200
    session = AgentSession.objects.get(session_id="sess-alice")
    assert session.project == secret
    return session


def test_another_principal_cannot_take_a_session_over(
    api: ApiCall, alices_session: AgentSession, bob: Persona
) -> None:
    before = (Project.objects.count(), Activity.objects.count())
    takeover = {"workspace": "acme", "project": "openproj", "session_id": "sess-alice"}

    status, body = api("post", "/api/v1/sessions", {**takeover, "agent": "codex"}, token=bob.token)

    assert status == 409
    assert body["code"] == "session_taken"
    session = AgentSession.objects.get(session_id="sess-alice")
    assert (session.project.name, session.agent) == ("secretproj", alices_session.agent)
    assert (Project.objects.count(), Activity.objects.count()) == before


def test_a_refused_takeover_creates_no_project(
    api: ApiCall, alices_session: AgentSession, bob: Persona
) -> None:
    takeover = {"workspace": "bobs", "project": "brand-new", "session_id": "sess-alice"}

    assert api("post", "/api/v1/sessions", takeover, token=bob.token)[0] == 409
    assert not Project.objects.filter(name="brand-new").exists()


def test_the_owner_may_register_its_session_again(
    api: ApiCall, alices_session: AgentSession, alice: Persona
) -> None:
    moved = {"workspace": "acme", "project": "openproj", "session_id": "sess-alice"}

    assert api("post", "/api/v1/sessions", moved, token=alice.token)[0] == 200
    assert AgentSession.objects.get(session_id="sess-alice").project.name == "openproj"


def test_another_principals_session_header_counts_as_unknown(
    handshake: RawMcp, alices_session: AgentSession, bob: Persona
) -> None:
    """The report's takeover: alice's session header must never give bob her scope."""
    make_project(None, "default", "default")
    headers = {"Authorization": f"Bearer {bob.token}", "X-Memory-Actor-Session-Id": "sess-alice"}

    result = handshake.call_tool("memory_message_list", {}, headers=headers)

    assert result["structuredContent"]["scope_source"] == "default_after_mismatch"
    assert "secretproj" not in str(result)


def test_a_session_scope_sends_as_its_own_project(
    handshake: RawMcp, alices_session: AgentSession, alice: Persona
) -> None:
    make_project(alice, "default", "project-b")
    headers = {"Authorization": f"Bearer {alice.token}", "X-Memory-Actor-Session-Id": "sess-alice"}
    arguments = {k: v for k, v in SEND.items() if not k.startswith("from_")}

    result = handshake.call_tool("memory_message_send", arguments, headers=headers)

    assert result["isError"] is False, result
    assert Message.objects.get().from_project.name == "secretproj"
