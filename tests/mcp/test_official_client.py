"""The official Python client (``mcp`` 2.3.0) against a live server, in each connect mode.

``auto`` probes ``server/discover`` and stays modern when it succeeds, ``legacy`` runs the
initialize handshake, ``2026-07-28`` speaks the modern revision without probing. ORM work
happens outside the event loop (Django refuses the ORM inside one).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent
from pytest_django.live_server_helper import LiveServer

from aimemory_site.lib.principal import Principal
from messaging.models import Message
from messaging.notices import SECURITY_NOTICE
from projects.services import session_start
from tests.conftest import A, B, Persona, make_project
from tests.mcp.test_handshake_era import TOOL_NAMES

pytestmark = pytest.mark.django_db(transaction=True)

MODES = ("auto", "legacy", "2026-07-28")
NEGOTIATED = {"auto": "2026-07-28", "legacy": "2025-11-25", "2026-07-28": "2026-07-28"}
SEND = {
    "to_workspace": "default",
    "to_project": "project-b",
    "from_workspace": "default",
    "from_project": "project-a",
    "body": "Please add a /v1/export endpoint that streams NDJSON.",
}

T = TypeVar("T")


def with_client(
    live_server: LiveServer,
    mode: str,
    scenario: Callable[[Client], Awaitable[T]],
    *,
    headers: dict[str, str] | None = None,
) -> T:
    """Connect the official client in ``mode`` (with extra HTTP headers) and run ``scenario``."""

    async def main() -> T:
        async with (
            httpx2.AsyncClient(headers=headers or {}, timeout=30) as http,
            Client(
                streamable_http_client(f"{live_server.url}/mcp", http_client=http), mode=mode
            ) as client,
        ):
            assert client.protocol_version == NEGOTIATED[mode]
            return await scenario(client)

    return anyio.run(main)


def _text(result: CallToolResult) -> str:
    [content] = result.content
    assert isinstance(content, TextContent)
    return content.text


async def ok(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, _text(result)
    payload: dict[str, Any] | None = result.structured_content
    assert payload is not None
    return payload


async def refused(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    return _text(result)


@pytest.fixture
def projects(transactional_db: None) -> None:
    make_project(None, "default", "project-a")
    make_project(None, "default", "project-b")


@pytest.mark.parametrize("mode", MODES)
def test_the_client_lists_every_tool(live_server: LiveServer, mode: str) -> None:
    async def scenario(client: Client) -> list[str]:
        listed = await client.list_tools()
        return [tool.name for tool in listed.tools]

    assert with_client(live_server, mode, scenario) == TOOL_NAMES


@pytest.mark.parametrize("mode", MODES)
def test_a_full_round_trip(live_server: LiveServer, mode: str, projects: None) -> None:
    async def scenario(client: Client) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        seen["sent"] = (await ok(client, "memory_message_send", SEND))["message_id"]
        seen["listed"] = await ok(client, "memory_message_list", B)
        seen["briefed"] = await ok(client, "memory_briefing", B)
        seen["popped"] = await ok(client, "memory_message_pop", B)
        seen["popped_again"] = await ok(client, "memory_message_pop", B)
        seen["briefed_after"] = await ok(client, "memory_briefing", B)
        seen["to_cancel"] = (await ok(client, "memory_message_send", SEND))["message_id"]
        seen["cancelled"] = await ok(client, "memory_message_cancel", A)
        seen["left"] = await ok(client, "memory_message_list", B)
        return seen

    seen = with_client(live_server, mode, scenario)
    assert [m["id"] for m in seen["listed"]["messages"]] == [seen["sent"]]
    assert seen["briefed"]["pending_message_count"] == 1
    assert seen["popped"]["message"]["id"] == seen["sent"]
    assert seen["popped"]["message"]["body"] == SEND["body"]
    assert seen["popped"]["security_notice"] == SECURITY_NOTICE
    assert seen["popped_again"] == {"message": None}
    assert seen["briefed_after"]["pending_message_count"] == 0
    assert seen["cancelled"] == {"cancelled": 1}
    assert seen["left"] == {"messages": []}
    assert Message.objects.get(pk=seen["to_cancel"]).state == Message.State.CANCELLED


@pytest.mark.parametrize("mode", MODES)
def test_unscoped_pop_cancel_and_send_are_refused_and_leave_the_mail_pending(
    live_server: LiveServer, mode: str, projects: None
) -> None:
    unsigned = {k: v for k, v in SEND.items() if not k.startswith("from_")}

    async def scenario(client: Client) -> tuple[str, list[str]]:
        message_id = (await ok(client, "memory_message_send", SEND))["message_id"]
        texts = [
            await refused(client, "memory_message_pop", {}),
            await refused(client, "memory_message_cancel", {}),
            await refused(client, "memory_message_send", unsigned),
        ]
        return message_id, texts

    message_id, texts = with_client(live_server, mode, scenario)
    pop, cancel, send = texts
    assert pop.startswith("refusing to pop from default/default: it was resolved by default")
    assert cancel.startswith("refusing to cancel the outbox of default/default")
    assert send.startswith("refusing to send as default/default")
    assert [str(m.id) for m in Message.objects.all()] == [message_id]
    assert Message.objects.get().state == Message.State.PENDING


@pytest.mark.parametrize("mode", MODES)
def test_a_hook_registered_session_pops_its_own_inbox_unnamed(
    live_server: LiveServer, mode: str, projects: None
) -> None:
    session_start(
        principal=Principal.anonymous(),
        workspace="default",
        project="project-b",
        session_id="claude-session-b",
        agent="claude-code",
    )

    async def scenario(client: Client) -> tuple[str, dict[str, Any]]:
        message_id = (await ok(client, "memory_message_send", SEND))["message_id"]
        return message_id, await ok(client, "memory_message_pop", {})

    message_id, popped = with_client(
        live_server, mode, scenario, headers={"X-Memory-Actor-Session-Id": "claude-session-b"}
    )
    assert popped["message"]["id"] == message_id
    assert Message.objects.get(pk=message_id).claimed_by_session is not None


@pytest.mark.parametrize("mode", MODES)
def test_a_users_bearer_is_accepted_on_an_auth_server(
    live_server: LiveServer, mode: str, auth_on: str, alice: Persona
) -> None:
    make_project(alice, "default", "alpha", restricted=True)
    alpha = {"workspace": "default", "project": "alpha"}

    async def scenario(client: Client) -> dict[str, Any]:
        return await ok(client, "memory_briefing", alpha)

    briefing = with_client(
        live_server, mode, scenario, headers={"Authorization": f"Bearer {alice.token}"}
    )
    assert briefing["scope"]["resolved_by"] == "explicit"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("bearer", [None, "Bearer not-a-real-token"])
def test_without_a_valid_bearer_the_client_gets_401(
    live_server: LiveServer, mode: str, auth_on: str, bearer: str | None
) -> None:
    async def scenario(client: Client) -> list[str]:
        listed = await client.list_tools()
        return [tool.name for tool in listed.tools]

    headers = {"Authorization": bearer} if bearer else {}
    with pytest.raises((MCPError, ExceptionGroup)) as raised:
        with_client(live_server, mode, scenario, headers=headers)
    assert _mcp_error(raised.value).code == 401


def _mcp_error(exc: BaseException) -> MCPError:
    """The MCPError inside what the client raised (task groups wrap it in ExceptionGroups)."""
    if isinstance(exc, MCPError):
        return exc
    assert isinstance(exc, BaseExceptionGroup), exc
    [inner] = exc.exceptions
    return _mcp_error(inner)
