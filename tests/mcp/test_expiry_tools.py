"""``memory_message_send(expires_in_seconds?)`` and the ``expired`` state through MCP
(docs/reference.md#messages): the official client against a live server, and the raw
caller in both protocol eras."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from mcp import Client
from pytest_django.live_server_helper import LiveServer

from messaging.models import Message
from tests.conftest import A, B, make_project
from tests.mcp.test_official_client import SEND, ok, refused, with_client
from tests.mcp_raw import RawMcp


def _expire(message_id: str) -> None:
    Message.objects.filter(pk=message_id).update(expires_at=timezone.now() - timedelta(seconds=1))


@pytest.mark.django_db(transaction=True)
def test_the_official_client_sends_with_an_expiry_and_sees_it_expire(
    live_server: LiveServer,
) -> None:
    make_project(None, "default", "project-a")
    make_project(None, "default", "project-b")

    async def send(client: Client) -> dict[str, Any]:
        sent = await ok(client, "memory_message_send", {**SEND, "expires_in_seconds": 600})
        return {
            "sent": sent,
            "listed": await ok(client, "memory_message_list", B),
            "too_short": await refused(
                client, "memory_message_send", {**SEND, "expires_in_seconds": 59}
            ),
        }

    async def after(client: Client) -> dict[str, Any]:
        message_id = first["sent"]["message_id"]
        return {
            "listed": await ok(client, "memory_message_list", B),
            "status": await ok(client, "memory_message_status", {**A, "message_id": message_id}),
            "cancelled": await ok(client, "memory_message_cancel", {**A, "message_id": message_id}),
            "popped": await ok(client, "memory_message_pop", B),
        }

    first = with_client(live_server, "auto", send)
    _expire(first["sent"]["message_id"])
    second = with_client(live_server, "auto", after)

    [listed] = first["listed"]["messages"]
    assert listed["expires_at"] is not None
    assert "expires_in_seconds must be" in first["too_short"]
    assert second["listed"]["messages"] == []
    assert second["status"]["state"] == "expired"
    assert second["status"]["expires_at"] < listed["expires_at"]  # moved into the past
    assert second["cancelled"] == {"cancelled": 0}
    assert second["popped"] == {"message": None}


@pytest.mark.django_db
@pytest.mark.parametrize("seconds", [59, 2_592_001])
def test_an_expiry_out_of_range_is_a_tool_error_in_both_eras(
    mcp: RawMcp, project_a: Any, project_b: Any, seconds: int
) -> None:
    text = mcp.tool_error("memory_message_send", {**SEND, "expires_in_seconds": seconds})

    assert text.startswith("expires_in_seconds must be a whole number of seconds, 60..2592000")
    assert not Message.objects.exists()


@pytest.mark.django_db
def test_the_recipient_sees_expired_in_status_in_both_eras(
    mcp: RawMcp, project_a: Any, project_b: Any
) -> None:
    sent = mcp.call_tool("memory_message_send", {**SEND, "expires_in_seconds": 60})
    message_id = sent["structuredContent"]["message_id"]
    _expire(message_id)

    status = mcp.call_tool("memory_message_status", {**B, "message_id": message_id})

    assert status["structuredContent"]["state"] == "expired"
