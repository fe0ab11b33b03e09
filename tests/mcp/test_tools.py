"""The messaging tools over raw HTTP, in both eras: arguments, scope, refusals, results, errors."""

from __future__ import annotations

from typing import Any

import pytest

from aimemory_site.lib.decisions import (
    decision_reply_subject,
    decision_reply_write,
)
from aimemory_site.lib.mcp_tool import Tool, ToolCall
from aimemory_site.lib.principal import Principal
from aimemory_site.mcp import server
from messaging import statements
from messaging.models import Message
from messaging.notices import SECURITY_NOTICE
from projects.models import AgentSession, Project
from projects.scope import scope_hint, scope_resolve
from projects.services import session_start
from tests.conftest import SEND, A, B, Persona
from tests.decision_examples import MERGE_BODY, MERGE_DECISION, MERGE_SUBJECT
from tests.mcp_raw import RawMcp, error_of

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _projects(project_a: Project, project_b: Project) -> None:
    """Every test here has default/project-a (sender) and default/project-b (recipient)."""


def _send(mcp: RawMcp, **changes: Any) -> str:
    result = mcp.call_tool("memory_message_send", {**SEND, **changes})
    assert result["isError"] is False, result
    message_id: str = result["structuredContent"]["message_id"]
    return message_id


def _pending() -> list[str]:
    return [str(m.id) for m in Message.objects.filter(state=Message.State.PENDING)]


def test_send_list_pop_cancel_round_trip(mcp: RawMcp) -> None:
    message_id = _send(mcp)
    listed = mcp.call_tool("memory_message_list", B)["structuredContent"]
    assert [m["id"] for m in listed["messages"]] == [message_id]
    assert listed["messages"][0]["from_project"] == "project-a"
    assert "hint" not in listed  # named explicitly
    outbox = mcp.call_tool("memory_message_list", {**A, "box": "outbox"})["structuredContent"]
    assert [m["id"] for m in outbox["messages"]] == [message_id]

    popped = mcp.call_tool("memory_message_pop", B)["structuredContent"]
    assert popped["message"]["id"] == message_id
    assert popped["message"]["body"] == SEND["body"]
    assert popped["security_notice"] == SECURITY_NOTICE
    assert mcp.call_tool("memory_message_pop", B)["structuredContent"] == {"message": None}

    second, third = _send(mcp), _send(mcp)
    one = mcp.call_tool("memory_message_cancel", {**A, "message_id": second})
    assert one["structuredContent"] == {"cancelled": 1}
    assert _pending() == [third]
    rest = mcp.call_tool("memory_message_cancel", A)
    assert rest["structuredContent"] == {"cancelled": 1}
    assert _pending() == []


def test_a_decision_lists_with_its_fields_and_a_popped_reply_carries_its_answer(
    mcp: RawMcp,
) -> None:
    ordinary = _send(mcp)
    question_id = _send(mcp, subject=MERGE_SUBJECT, body=MERGE_BODY)

    listed = mcp.call_tool("memory_message_list", B)["structuredContent"]["messages"]
    rows = {row["id"]: row for row in listed}
    assert rows[question_id]["decision"] == MERGE_DECISION
    assert rows[question_id]["decision_reply"] is None
    assert (rows[ordinary]["decision"], rows[ordinary]["decision_reply"]) == (None, None)

    _send(
        mcp,
        to_project="project-a",
        from_project="project-b",
        subject=decision_reply_subject(question_id),
        body=decision_reply_write(question_id, "merge", "Go: CI is green."),
    )
    popped = mcp.call_tool("memory_message_pop", A)["structuredContent"]["message"]
    assert popped["decision"] is None
    assert popped["decision_reply"] == {
        "question_id": question_id,
        "option": "merge",
        "comment": "Go: CI is green.",
        "accepted": True,
        "refusal": None,
        "via": "message",
    }


def test_pop_of_a_named_message_claims_only_that_one(mcp: RawMcp) -> None:
    first, second = _send(mcp), _send(mcp)
    popped = mcp.call_tool("memory_message_pop", {**B, "message_id": second})
    assert popped["structuredContent"]["message"]["id"] == second
    assert _pending() == [first]


def test_the_briefing_counts_pending_mail_and_says_how_scope_was_resolved(mcp: RawMcp) -> None:
    _send(mcp)
    briefing = mcp.call_tool("memory_briefing", B)["structuredContent"]
    assert briefing == {
        "scope": {"workspace": "default", "project": "project-b", "resolved_by": "explicit"},
        "pending_message_count": 1,
        "brief": None,
    }


@pytest.mark.parametrize(
    ("tool", "arguments", "text"),
    [
        (
            "memory_message_pop",
            {},
            "refusing to pop from default/default: it was resolved by default, not named, so it "
            "may not be the project you are working in. Pass workspace and project (the "
            "SessionStart inbox notice and memory_briefing name them).",
        ),
        (
            "memory_message_cancel",
            {},
            "refusing to cancel the outbox of default/default: it was resolved by default, not "
            "named, so it may not be the project you are working in. Pass workspace and project "
            "to name the sending project.",
        ),
        (
            "memory_message_send",
            {k: v for k, v in SEND.items() if not k.startswith("from_")},
            "refusing to send as default/default: it was resolved by default, not named, so it "
            "may not be the project you are working in. Pass from_workspace and from_project to "
            "name the sending project.",
        ),
    ],
)
def test_an_unnamed_scope_is_refused_with_the_fixed_text_and_changes_nothing(
    mcp: RawMcp, tool: str, arguments: dict[str, Any], text: str
) -> None:
    message_id = _send(mcp)
    assert mcp.tool_error(tool, arguments) == text
    assert _pending() == [message_id]


def test_a_session_id_the_server_does_not_know_is_refused_too(mcp: RawMcp) -> None:
    _send(mcp)
    text = mcp.tool_error(
        "memory_message_pop", headers={"X-Memory-Actor-Session-Id": "never-started"}
    )
    assert "resolved by default_after_mismatch" in text
    assert len(_pending()) == 1


@pytest.mark.parametrize("carrier", ["header", "meta"])
def test_a_registered_session_names_the_scope_for_pop(mcp: RawMcp, carrier: str) -> None:
    started = session_start(
        principal=Principal.anonymous(),
        workspace="default",
        project="project-b",
        session_id="session-b",
        agent="claude-code",
    )
    message_id = _send(mcp)
    if carrier == "header":
        kw: dict[str, Any] = {"headers": {"X-Memory-Actor-Session-Id": "session-b"}}
    else:
        kw = {"meta": {"ai.opencode/sessionID": "session-b"}}
    popped = mcp.call_tool("memory_message_pop", **kw)["structuredContent"]
    assert popped["message"]["id"] == message_id
    claimed = Message.objects.get(pk=message_id)
    assert claimed.claimed_by_session == started.session
    assert claimed.claimed_by_agent == "claude"


def test_a_session_sends_as_its_project_and_is_recorded_as_the_sender(mcp: RawMcp) -> None:
    session_start(
        principal=Principal.anonymous(),
        workspace="default",
        project="project-a",
        session_id="session-a",
        agent="codex",
    )
    arguments = {k: v for k, v in SEND.items() if not k.startswith("from_")}
    result = mcp.call_tool(
        "memory_message_send", arguments, headers={"X-Memory-Actor-Session-Id": "session-a"}
    )
    sent = Message.objects.get(pk=result["structuredContent"]["message_id"])
    assert sent.from_project.name == "project-a"
    assert sent.from_agent == "codex"
    assert sent.from_session == AgentSession.objects.get(session_id="session-a")


def test_list_on_an_inferred_scope_answers_and_says_how_it_was_resolved(mcp: RawMcp) -> None:
    session_start(
        principal=Principal.anonymous(), workspace="default", project="project-b", session_id="s"
    )
    message_id = _send(mcp)
    for box, expected in (("inbox", [message_id]), ("outbox", [])):
        listed = mcp.call_tool("memory_message_list", {"box": box})["structuredContent"]
        assert [m["id"] for m in listed["messages"]] == expected
        assert listed["resolved_scope"] == B
        assert listed["scope_source"] == "shared_slot"
        expected_hint = scope_hint(
            scope_resolve(
                principal=Principal.anonymous(), workspace=None, project=None, session_id=None
            )
        )
        assert listed["hint"] == expected_hint


def test_the_briefing_on_a_session_says_it_was_resolved_by_session(mcp: RawMcp) -> None:
    session_start(
        principal=Principal.anonymous(), workspace="default", project="project-b", session_id="s"
    )
    briefing = mcp.call_tool("memory_briefing", headers={"X-Memory-Actor-Session-Id": "s"})
    assert briefing["structuredContent"]["scope"]["resolved_by"] == "session"


def test_naming_only_one_of_workspace_and_project_is_an_error(mcp: RawMcp) -> None:
    text = mcp.tool_error("memory_message_list", {"workspace": "default"})
    assert text == "workspace and project must be provided together"
    send_half = {**SEND}
    del send_half["from_project"]
    assert mcp.tool_error("memory_message_send", send_half) == text
    assert _pending() == []


@pytest.mark.parametrize(
    ("tool", "arguments", "fault"),
    [
        ("memory_message_pop", {**B, "bogus": 1}, "unknown argument 'bogus'"),
        ("memory_message_send", {"to_workspace": "default"}, "missing required argument 'body'"),
        ("memory_message_send", {**SEND, "body": 42}, "'body' must be a string, got a number"),
        ("memory_message_list", {**B, "limit": "5"}, "'limit' must be an integer, got a string"),
        ("memory_message_list", {**B, "limit": 2.5}, "'limit' must be an integer, got a number"),
        ("memory_message_list", {**B, "limit": True}, "'limit' must be an integer, got a boolean"),
        (
            "memory_message_pop",
            {**B, "message_id": None},
            "'message_id' must be a string, got null",
        ),
        ("memory_briefing", {"workspace": ["default"], "project": "p"}, "got an array"),
        ("memory_briefing", {"workspace": {}, "project": "p"}, "got an object"),
    ],
)
def test_bad_arguments_are_a_tool_error_naming_the_fault(
    mcp: RawMcp, tool: str, arguments: dict[str, Any], fault: str
) -> None:
    _send(mcp)
    text = mcp.tool_error(tool, arguments)
    assert text.startswith(f"{tool}: ")
    assert fault in text
    assert "It takes (" in text
    assert len(_pending()) == 1


def test_box_is_checked_by_the_same_rule_as_the_json_api(mcp: RawMcp) -> None:
    message_id = _send(mcp)
    text = mcp.tool_error("memory_message_list", {**B, "box": "trash"})
    assert text == 'box must be "inbox" or "outbox", got "trash"'
    listed = mcp.call_tool("memory_message_list", {**B, "box": ""})["structuredContent"]
    assert [m["id"] for m in listed["messages"]] == [message_id]


def test_every_fault_of_a_call_is_named_at_once(mcp: RawMcp) -> None:
    text = mcp.tool_error("memory_message_send", {"to_project": 1, "cc": "x"})
    assert "unknown argument 'cc'" in text
    assert "missing required argument 'to_workspace'" in text
    assert "missing required argument 'body'" in text
    assert "'to_project' must be a string" in text
    assert text.endswith(
        "It takes (to_workspace, to_project, body, subject?, from_workspace?, from_project?, in_reply_to?, idempotency_key?, expires_in_seconds?)."
    )


def test_arguments_that_are_not_an_object_are_a_tool_error(mcp: RawMcp) -> None:
    result = mcp.result("tools/call", {"name": "memory_briefing", "arguments": ["default"]})
    assert result["isError"] is True
    assert "arguments must be an object" in result["content"][0]["text"]


def test_an_integral_number_is_an_integer(mcp: RawMcp) -> None:
    for i in range(3):
        _send(mcp, subject=f"request {i}")
    listed = mcp.call_tool("memory_message_list", {**B, "limit": 2.0})["structuredContent"]
    assert len(listed["messages"]) == 2


def test_business_errors_are_tool_errors_with_the_services_message(
    mcp: RawMcp, monkeypatch: pytest.MonkeyPatch
) -> None:
    unknown = mcp.tool_error("memory_message_send", {**SEND, "to_project": "project-typo"})
    assert unknown.startswith("project default/project-typo not found.")
    bad_id = mcp.tool_error("memory_message_pop", {**B, "message_id": "1234"})
    assert bad_id == "message_id must be a full UUID, got '1234'"
    empty = mcp.tool_error("memory_message_send", {**SEND, "body": "   "})
    assert empty == "body must not be empty"
    monkeypatch.setattr(statements, "MAX_PENDING_PER_INBOX", 1)  # the bound the send runs
    _send(mcp)
    full = mcp.tool_error("memory_message_send", SEND)
    assert full.startswith("the inbox of default/project-b is full")
    assert len(_pending()) == 1


def test_a_caller_with_read_access_only_is_told_write_is_needed(
    mcp: RawMcp, auth_on: str, bob: Persona, alices_restricted: Project
) -> None:
    bobs = {"Authorization": f"Bearer {bob.token}"}
    alpha = {"workspace": "default", "project": "alpha"}
    assert mcp.call_tool("memory_message_list", alpha, headers=bobs)["isError"] is False
    refused = mcp.tool_error("memory_message_pop", alpha, headers=bobs)
    assert refused.startswith("not authorized for default/alpha: you have read access")


def test_a_project_the_caller_cannot_read_looks_like_a_missing_one(
    mcp: RawMcp, auth_on: str, charlie: Persona, alices_restricted: Project
) -> None:
    charlies = {"Authorization": f"Bearer {charlie.token}"}
    alpha = {"workspace": "default", "project": "alpha"}
    text = mcp.tool_error("memory_briefing", alpha, headers=charlies)
    assert text.startswith("project default/alpha not found.")


def test_the_sender_is_attributed_to_the_bearers_user(
    mcp: RawMcp, auth_on: str, alice: Persona
) -> None:
    alices = {"Authorization": f"Bearer {alice.token}"}
    result = mcp.call_tool("memory_message_send", SEND, headers=alices)
    sent = Message.objects.get(pk=result["structuredContent"]["message_id"])
    assert sent.from_owner_user == "alice"


def test_an_unexpected_failure_is_an_internal_error_not_an_html_page(
    mcp: RawMcp, monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(call: ToolCall) -> dict[str, Any]:
        raise RuntimeError("database went away")

    broken = Tool(
        name="memory_briefing",
        description="broken",
        input_schema={"type": "object", "properties": {}, "additionalProperties": False},
        handler=explode,
    )
    monkeypatch.setitem(server.TOOLS, "memory_briefing", broken)
    response = mcp.request("tools/call", {"name": "memory_briefing", "arguments": {}})
    assert response.status_code == 200
    error = error_of(response)
    assert error["code"] == -32603
    assert "database went away" not in error["message"]


CLOSED: dict[str, Any] = {"type": "object", "additionalProperties": False}


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {}},  # open to unknown arguments
        {**CLOSED, "properties": {"n": {"type": "integer", "minimum": 1}}},
        {**CLOSED, "properties": {"xs": {"type": "array"}}},
        {**CLOSED, "properties": {}, "required": ["ghost"]},
    ],
)
def test_a_tool_whose_schema_the_check_cannot_enforce_is_refused_at_declaration(
    schema: dict[str, Any],
) -> None:
    with pytest.raises(ValueError):
        Tool(name="t", description="d", input_schema=schema, handler=lambda call: {})
