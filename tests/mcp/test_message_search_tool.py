"""``memory_message_search(query, workspace?, project?, box?, limit?)`` through the official
client against a live server (docs/reference.md#search-and-threads): its listing, its
hits, its refusals, and an inferred scope answered as list answers one."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from pytest_django.live_server_helper import LiveServer

from aimemory_site.lib.principal import Principal
from messaging.models import Message
from projects.scope import scope_hint, scope_resolve
from projects.services import session_start
from tests.conftest import A, B, Persona, make_project
from tests.mcp.test_official_client import MODES, SEND, ok, refused, with_client

pytestmark = pytest.mark.django_db(transaction=True)

TOOL = "memory_message_search"


@pytest.fixture
def projects(transactional_db: None) -> None:
    make_project(None, "default", "project-a")
    make_project(None, "default", "project-b")


@pytest.mark.parametrize("mode", MODES)
def test_the_tool_is_listed_read_only_with_query_required(
    live_server: LiveServer, mode: str
) -> None:
    async def scenario(client: Client) -> Any:
        listed = await client.list_tools()
        return next(tool for tool in listed.tools if tool.name == TOOL)

    tool = with_client(live_server, mode, scenario)

    assert tool.input_schema["required"] == ["query"]
    assert set(tool.input_schema["properties"]) == {"query", "box", "limit", "workspace", "project"}
    assert tool.annotations is not None
    assert tool.annotations.read_only_hint is True


@pytest.mark.parametrize("mode", MODES)
def test_a_named_search_finds_sent_and_received_mail_without_bodies(
    live_server: LiveServer, mode: str, projects: None
) -> None:
    async def scenario(client: Client) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        seen["sent"] = (await ok(client, "memory_message_send", SEND))["message_id"]
        seen["popped"] = await ok(client, "memory_message_pop", B)
        seen["inbox"] = await ok(client, TOOL, {**B, "query": "endpoint"})
        seen["outbox"] = await ok(client, TOOL, {**A, "query": "endpoint", "box": "outbox"})
        seen["all"] = await ok(client, TOOL, {**A, "query": "endpoint", "box": "all"})
        seen["none"] = await ok(client, TOOL, {**A, "query": "endpoint"})
        seen["stop_words"] = await ok(client, TOOL, {**B, "query": "the and of"})
        return seen

    seen = with_client(live_server, mode, scenario)

    [hit] = seen["inbox"]["messages"]
    assert hit["id"] == seen["sent"]
    assert hit["state"] == "claimed"  # found after the pop, in every stored state
    assert "body" not in hit
    assert "[endpoint]" in hit["snippet"].lower()
    assert set(seen["inbox"]) == {"messages"}  # named: no hint
    assert [h["id"] for h in seen["outbox"]["messages"]] == [seen["sent"]]
    assert [h["id"] for h in seen["all"]["messages"]] == [seen["sent"]]
    assert seen["none"] == {"messages": []}
    assert seen["stop_words"] == {"messages": []}
    assert Message.objects.get(pk=seen["sent"]).state == Message.State.CLAIMED


@pytest.mark.parametrize("mode", MODES)
def test_the_limit_cuts_the_hits(live_server: LiveServer, mode: str, projects: None) -> None:
    async def scenario(client: Client) -> dict[str, Any]:
        for n in range(3):
            await ok(client, "memory_message_send", {**SEND, "body": f"report number {n}"})
        return await ok(client, TOOL, {**B, "query": "report", "limit": 2})

    assert len(with_client(live_server, mode, scenario)["messages"]) == 2


@pytest.mark.parametrize("mode", MODES)
def test_an_inferred_scope_is_answered_with_how_it_was_resolved(
    live_server: LiveServer, mode: str, projects: None
) -> None:
    session_start(
        principal=Principal.anonymous(), workspace="default", project="project-b", session_id="s"
    )

    async def scenario(client: Client) -> tuple[str, dict[str, Any]]:
        message_id = (await ok(client, "memory_message_send", SEND))["message_id"]
        return message_id, await ok(client, TOOL, {"query": "endpoint"})

    message_id, answer = with_client(live_server, mode, scenario)

    assert [hit["id"] for hit in answer["messages"]] == [message_id]
    assert answer["resolved_scope"] == B
    assert answer["scope_source"] == "shared_slot"
    inferred = scope_resolve(
        principal=Principal.anonymous(), workspace=None, project=None, session_id=None
    )
    assert answer["hint"] == scope_hint(inferred)


@pytest.mark.parametrize("mode", MODES)
def test_refusals_are_tool_errors(live_server: LiveServer, mode: str, projects: None) -> None:
    async def scenario(client: Client) -> list[str]:
        return [
            await refused(client, TOOL, {**B, "query": "x" * 501}),
            await refused(client, TOOL, {**B, "query": "x", "box": "trash"}),
            await refused(client, TOOL, {"workspace": "default", "project": "nope", "query": "x"}),
            await refused(client, TOOL, {**B}),
        ]

    too_long, bad_box, unknown, no_query = with_client(live_server, mode, scenario)

    assert "500" in too_long
    assert "trash" in bad_box
    assert unknown.startswith("project default/nope not found")
    assert "query" in no_query


def test_charlie_searches_a_project_he_cannot_read_as_a_missing_one(
    live_server: LiveServer, auth_on: str, alice: Persona, charlie: Persona
) -> None:
    make_project(alice, "default", "alpha", restricted=True)

    async def scenario(client: Client) -> list[str]:
        return [
            await refused(client, TOOL, {"workspace": "default", "project": p, "query": "plans"})
            for p in ("alpha", "nope")
        ]

    hidden, missing = with_client(
        live_server, "auto", scenario, headers={"Authorization": f"Bearer {charlie.token}"}
    )

    assert hidden.replace("alpha", "nope") == missing
