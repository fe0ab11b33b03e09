"""Inferred scopes are per caller (docs/reference.md#scope-resolution): charlie, who may read nothing of
alice's, learns nothing of the project she works in from an unscoped call."""

from __future__ import annotations

import pytest

from projects.models import Grant, Project
from projects.services import server_boot_record
from tests.conftest import ApiCall, Persona, make_project
from tests.mcp_raw import RawMcp

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice_at_work(api: ApiCall, alice: Persona, charlie: Persona) -> Project:
    """Right after alice's session start in her restricted acme/secretproj."""
    server_boot_record()
    secret = make_project(alice, "acme", "secretproj", restricted=True)
    start = {"workspace": "acme", "project": "secretproj", "session_id": "sess-alice"}
    assert api("post", "/api/v1/sessions", start, token=alice.token)[0] == 200
    return secret


def _as(persona: Persona) -> dict[str, str]:
    return {"Authorization": f"Bearer {persona.token}"}


@pytest.mark.parametrize(
    "tool",
    ["memory_message_pop", "memory_message_list", "memory_briefing", "memory_message_cancel"],
)
def test_charlies_unscoped_call_names_nothing_of_alices(
    mcp: RawMcp, alice_at_work: Project, charlie: Persona, tool: str
) -> None:
    result = mcp.call_tool(tool, {}, headers=_as(charlie))

    text = str(result)
    assert "secretproj" not in text
    assert "acme" not in text


def test_charlies_unscoped_send_names_nothing_of_alices(
    mcp: RawMcp, alice_at_work: Project, charlie: Persona
) -> None:
    arguments = {"to_workspace": "acme", "to_project": "secretproj", "body": "hi"}

    text = mcp.tool_error("memory_message_send", arguments, headers=_as(charlie))

    assert "refusing to send as default/default" in text
    assert "secretproj" not in text.split("send as", 1)[1].split(":", 1)[0]


def test_charlie_is_inferred_into_his_own_project(
    mcp: RawMcp, alice_at_work: Project, api: ApiCall, alice: Persona, charlie: Persona
) -> None:
    start = {"workspace": "charlies", "project": "notes", "session_id": "sess-charlie"}
    assert api("post", "/api/v1/sessions", start, token=charlie.token)[0] == 200
    # alice starts again later: the newest session overall is hers, not charlie's.
    again = {"workspace": "acme", "project": "secretproj", "session_id": "sess-alice"}
    assert api("post", "/api/v1/sessions", again, token=alice.token)[0] == 200

    result = mcp.call_tool("memory_message_list", {}, headers=_as(charlie))

    assert result["structuredContent"]["resolved_scope"] == {
        "workspace": "charlies",
        "project": "notes",
    }
    assert result["structuredContent"]["scope_source"] == "shared_slot"


def test_a_reader_sees_the_shared_slot_of_a_project_it_may_read(
    mcp: RawMcp, alice_at_work: Project, bob: Persona
) -> None:
    """Readers are not blinded: bob, granted read, is inferred into alice's project."""
    Grant.objects.create(user=bob.user, project=alice_at_work, level=Grant.Level.READ)

    result = mcp.call_tool("memory_message_list", {}, headers=_as(bob))

    assert result["structuredContent"]["resolved_scope"]["project"] == "secretproj"


def test_the_startup_seed_is_per_caller_too(
    mcp: RawMcp, alice_at_work: Project, charlie: Persona
) -> None:
    server_boot_record()  # a restart: alice's activity is now from before it
    make_project(None, "default", "default")

    result = mcp.call_tool("memory_message_list", {}, headers=_as(charlie))

    assert result["structuredContent"]["scope_source"] == "default"
    assert "secretproj" not in str(result)
