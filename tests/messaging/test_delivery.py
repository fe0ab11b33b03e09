"""Delivery you can trust (docs/reference.md#status-replies-and-retries): status, replies, idempotent send and pop
retries, and what a send says arrived."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone

from messaging.housekeeping import (
    HOUSEKEEPING_EVERY_SECONDS,
    housekeeping_queued,
    housekeeping_schedule,
)
from messaging.models import Message, PopRequest
from messaging.notices import SECURITY_NOTICE
from projects.models import Project
from tests.background import tasks_run_due
from tests.conftest import SEND, A, ApiCall, B, Persona
from tests.mcp_raw import RawMcp

pytestmark = pytest.mark.django_db

C = {"workspace": "default", "project": "project-c"}


@pytest.fixture(autouse=True)
def _projects(project_a: Project, project_b: Project, project_c: Project) -> None:
    """A sends to B; C is a bystander."""


def _send(api: ApiCall, **changes: Any) -> dict[str, Any]:
    status, body = api("post", "/api/v1/messages", {**SEND, **changes})
    assert status == 201, body
    answer: dict[str, Any] = body
    return answer


def _status(api: ApiCall, message_id: str, scope: dict[str, str]) -> tuple[int, Any]:
    return api("get", f"/api/v1/messages/{message_id}", scope)


# --- status ----------------------------------------------------------------------------


@pytest.mark.parametrize("scope", [A, B], ids=["sender", "recipient"])
def test_status_follows_the_message_through_pending_claimed_and_cancelled(
    api: ApiCall, scope: dict[str, str]
) -> None:
    claimed = _send(api)["message_id"]
    cancelled = _send(api)["message_id"]

    status, pending = _status(api, claimed, scope)
    assert status == 200
    assert pending["state"] == "pending"
    assert "body" not in pending
    assert pending["claimed_at"] is None and pending["cancelled_at"] is None

    assert api("post", "/api/v1/messages/pop", {**B, "message_id": claimed})[0] == 200
    api("post", "/api/v1/messages/cancel", {**A, "message_id": cancelled})

    later = _status(api, claimed, scope)[1]
    assert later["state"] == "claimed"
    assert later["claimed_at"] is not None
    assert later["claimed_by_agent"] == "other"
    gone = _status(api, cancelled, scope)[1]
    assert gone["state"] == "cancelled"
    assert gone["cancelled_at"] is not None
    assert "body" not in gone


def test_a_third_project_gets_exactly_what_an_unknown_id_gets(api: ApiCall) -> None:
    message_id = _send(api)["message_id"]
    unknown = "0190b1d8-0000-7000-8000-000000000000"

    third = _status(api, message_id, C)
    missing = _status(api, unknown, C)

    assert third[0] == missing[0] == 404
    assert third[1]["code"] == "message_not_found"
    assert json.dumps(third[1]).replace(message_id, unknown) == json.dumps(missing[1])


def test_status_of_a_malformed_id_is_a_bad_request(api: ApiCall) -> None:
    status, body = _status(api, "not-a-uuid", A)

    assert status == 400
    assert body["code"] == "invalid_message_id"


def test_status_over_mcp_names_an_inferred_scope(mcp: RawMcp, api: ApiCall) -> None:
    message_id = _send(api)["message_id"]
    api("post", "/api/v1/sessions", {**B, "session_id": "sess-b"})

    result = mcp.call_tool("memory_message_status", {"message_id": message_id})

    answer = result["structuredContent"]
    assert answer["state"] == "pending"
    assert answer["resolved_scope"] == B
    assert answer["scope_source"] == "shared_slot"
    assert "hint" in answer
    assert "body" not in answer


# --- replies -----------------------------------------------------------------------------


def test_a_reply_points_at_what_it_answers(api: ApiCall) -> None:
    question = _send(api)["message_id"]
    api("post", "/api/v1/messages/pop", B)
    reply = {
        "to_workspace": "default",
        "to_project": "project-a",
        "from_workspace": "default",
        "from_project": "project-b",
        "body": "Done: /v1/export streams NDJSON now.",
        "in_reply_to": question,
    }

    answer = _send(api, **reply)

    [row] = api("get", "/api/v1/messages", A)[1]["messages"]
    assert row["id"] == answer["message_id"]
    assert row["in_reply_to"] == question
    popped = api("post", "/api/v1/messages/pop", A)[1]
    assert popped["message"]["in_reply_to"] == question
    assert _status(api, answer["message_id"], A)[1]["in_reply_to"] == question


@pytest.mark.parametrize("target", ["unrelated", "unknown", "not-a-uuid"])
def test_a_reply_to_a_message_of_other_projects_is_refused(api: ApiCall, target: str) -> None:
    elsewhere = Message.objects.create(
        to_project=Project.objects.get(name="project-c"),
        from_project=Project.objects.get(name="project-b"),
        body="between b and c",
    )
    in_reply_to = {
        "unrelated": str(elsewhere.id),
        "unknown": "0190b1d8-0000-7000-8000-000000000000",
        "not-a-uuid": "42",
    }[target]
    before = Message.objects.count()

    status, body = api("post", "/api/v1/messages", {**SEND, "in_reply_to": in_reply_to})

    assert status == 400
    assert body["code"] == "invalid_in_reply_to"
    assert Message.objects.count() == before


def test_a_reply_over_mcp(mcp: RawMcp, api: ApiCall) -> None:
    question = _send(api)["message_id"]

    result = mcp.call_tool("memory_message_send", {**SEND, "in_reply_to": question})

    assert result["isError"] is False
    assert Message.objects.get(pk=result["structuredContent"]["message_id"]).in_reply_to


# --- idempotent send ---------------------------------------------------------------------


def test_a_retried_send_answers_the_first_message_and_writes_nothing(api: ApiCall) -> None:
    first_status, first = api("post", "/api/v1/messages", {**SEND, "idempotency_key": "k-1"})
    again_status, again = api(
        "post", "/api/v1/messages", {**SEND, "idempotency_key": "k-1", "body": "changed"}
    )

    assert (first_status, again_status) == (201, 200)
    assert first["idempotent_replay"] is False
    assert again["idempotent_replay"] is True
    assert again["message_id"] == first["message_id"]
    assert Message.objects.count() == 1
    assert Message.objects.get().body == SEND["body"]  # the key wins, not the new body


def test_a_key_belongs_to_its_sending_project(api: ApiCall) -> None:
    from_c = {**SEND, "from_project": "project-c", "idempotency_key": "shared"}
    first = api("post", "/api/v1/messages", {**SEND, "idempotency_key": "shared"})
    other = api("post", "/api/v1/messages", from_c)

    assert first[0] == other[0] == 201
    assert first[1]["message_id"] != other[1]["message_id"]


def test_a_key_is_forgotten_after_24_hours(api: ApiCall) -> None:
    first = _send(api, idempotency_key="old")["message_id"]
    Message.objects.filter(pk=first).update(created_at=timezone.now() - timedelta(hours=25))

    status, again = api("post", "/api/v1/messages", {**SEND, "idempotency_key": "old"})

    assert status == 201
    assert again["message_id"] != first
    assert Message.objects.count() == 2


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("idempotency_key", "k" * 201, "invalid_idempotency_key"),
        ("idempotency_key", "", "invalid_idempotency_key"),
    ],
)
def test_a_bad_key_is_refused_and_writes_nothing(
    api: ApiCall, field: str, value: str, code: str
) -> None:
    status, body = api("post", "/api/v1/messages", {**SEND, field: value})

    assert status == 400
    assert body["code"] == code
    assert not Message.objects.exists()


def test_a_retried_send_over_mcp(mcp: RawMcp) -> None:
    arguments = {**SEND, "idempotency_key": "mcp-key"}
    first = mcp.call_tool("memory_message_send", arguments)["structuredContent"]
    again = mcp.call_tool("memory_message_send", arguments)["structuredContent"]

    assert again == {**first, "idempotent_replay": True}
    assert Message.objects.count() == 1


@pytest.mark.usefixtures("auth_on")
def test_a_key_belongs_to_its_principal_on_a_shared_sending_project(
    api: ApiCall, alice: Persona, bob: Persona, alices_restricted: Project
) -> None:
    """project-a is open: alice and bob both write as it. bob's key, which alice used,
    is his own send, and tells him nothing of hers (her recipient is restricted)."""
    to_alpha = {**SEND, "to_project": "alpha", "idempotency_key": "shared"}
    alices = api("post", "/api/v1/messages", to_alpha, token=alice.token)
    bobs = api("post", "/api/v1/messages", {**SEND, "idempotency_key": "shared"}, token=bob.token)
    bobs_again = api(
        "post", "/api/v1/messages", {**SEND, "idempotency_key": "shared"}, token=bob.token
    )

    assert alices[0] == bobs[0] == 201
    assert bobs[1]["idempotent_replay"] is False
    assert bobs[1]["message_id"] != alices[1]["message_id"]
    assert (bobs_again[0], bobs_again[1]["message_id"]) == (200, bobs[1]["message_id"])
    assert sorted(Message.objects.values_list("to_project__name", flat=True)) == [
        "alpha",
        "project-b",
    ]
    status, shown = api("get", f"/api/v1/messages/{bobs[1]['message_id']}", A, token=bob.token)
    assert status == 200
    assert shown["to_project"] == "project-b"


@pytest.mark.usefixtures("auth_on")
def test_a_request_id_belongs_to_its_principal_on_a_shared_inbox(
    api: ApiCall, alice: Persona, bob: Persona
) -> None:
    """project-b is open: alice and bob both pop it. bob's pop with alice's request id
    claims the next message, and never hands him the one alice claimed."""
    alices_message, bobs_message = (
        api("post", "/api/v1/messages", {**SEND, "body": body}, token=alice.token)[1]["message_id"]
        for body in ("for alice's agent", "for bob's agent")
    )

    alices = api("post", "/api/v1/messages/pop", {**B, "request_id": "r-1"}, token=alice.token)
    bobs = api("post", "/api/v1/messages/pop", {**B, "request_id": "r-1"}, token=bob.token)
    bobs_again = api("post", "/api/v1/messages/pop", {**B, "request_id": "r-1"}, token=bob.token)

    assert alices[1]["message"]["id"] == alices_message
    assert bobs[1]["message"]["id"] == bobs_message
    assert bobs[1]["message"]["body"] == "for bob's agent"
    assert bobs_again[1] == bobs[1]
    assert not Message.objects.filter(state=Message.State.PENDING).exists()


# --- what arrived ------------------------------------------------------------------------


def test_a_send_says_what_the_cap_and_the_scrubber_did(api: ApiCall) -> None:
    token = "ghp_" + "a1B2" * 9
    body = f"use {token} to push\n" + "x" * 20_000

    answer = _send(api, body=body, subject=f"token {token}")

    assert answer["redactions"] == 2
    assert answer["omitted_chars"] == len(body) - len(token) + len("[REDACTED]") - 8000
    plain = _send(api)
    assert (plain["omitted_chars"], plain["redactions"]) == (0, 0)


# --- idempotent pop ----------------------------------------------------------------------


def test_a_repeated_pop_answers_the_same_and_the_next_pop_the_next(api: ApiCall) -> None:
    first_id = _send(api)["message_id"]
    second_id = _send(api)["message_id"]

    once = api("post", "/api/v1/messages/pop", {**B, "request_id": "r-1"})[1]
    again = api("post", "/api/v1/messages/pop", {**B, "request_id": "r-1"})[1]
    following = api("post", "/api/v1/messages/pop", {**B, "request_id": "r-2"})[1]

    assert once == again
    assert once["message"]["id"] == first_id
    assert once["message"]["body"] == SEND["body"]
    assert following["message"]["id"] == second_id


def test_a_repeated_empty_pop_stays_empty_when_mail_arrived_meanwhile(api: ApiCall) -> None:
    assert api("post", "/api/v1/messages/pop", {**B, "request_id": "r-empty"})[1] == {
        "message": None
    }
    _send(api)

    again = api("post", "/api/v1/messages/pop", {**B, "request_id": "r-empty"})[1]

    assert again == {"message": None}
    assert Message.objects.get().state == Message.State.PENDING


def test_a_request_id_is_kept_per_inbox(api: ApiCall) -> None:
    _send(api)
    _send(api, to_project="project-c")

    b = api("post", "/api/v1/messages/pop", {**B, "request_id": "same"})[1]
    c = api("post", "/api/v1/messages/pop", {**C, "request_id": "same"})[1]

    assert b["message"]["to_project"] == "project-b"
    assert c["message"]["to_project"] == "project-c"


def test_a_bad_request_id_is_refused_and_claims_nothing(api: ApiCall) -> None:
    _send(api)

    status, body = api("post", "/api/v1/messages/pop", {**B, "request_id": "r" * 201})

    assert status == 400
    assert body["code"] == "invalid_request_id"
    assert Message.objects.get().state == Message.State.PENDING


def test_the_pop_answer_reads_safely_as_one_string(api: ApiCall) -> None:
    _send(api)

    popped = api("post", "/api/v1/messages/pop", B)[1]

    assert list(popped) == ["security_notice", "message"]
    assert popped["security_notice"] == SECURITY_NOTICE
    keys = list(popped["message"])
    provenance = ["from_workspace", "from_project", "from_agent", "from_owner_user"]
    assert all(keys.index(key) < keys.index("body") for key in provenance)


# --- purge -------------------------------------------------------------------------------


def test_old_keys_and_request_ids_are_purged_by_the_command(api: ApiCall) -> None:
    old = _send(api, idempotency_key="old")["message_id"]
    fresh = _send(api, idempotency_key="fresh")["message_id"]
    api("post", "/api/v1/messages/pop", {**B, "request_id": "old-pop"})
    api("post", "/api/v1/messages/pop", {**B, "request_id": "fresh-pop"})
    long_ago = timezone.now() - timedelta(hours=25)
    Message.objects.filter(pk=old).update(created_at=long_ago)
    PopRequest.objects.filter(request_id="old-pop").update(created_at=long_ago)

    call_command("purge_retry_ids", verbosity=0)

    assert Message.objects.filter(pk=old).values_list(
        "idempotency_key", "idempotency_principal"
    ).get() == (None, None)
    assert Message.objects.filter(pk=fresh).values_list(
        "idempotency_key", "idempotency_principal"
    ).get() == ("fresh", "anonymous")
    assert list(PopRequest.objects.values_list("request_id", flat=True)) == ["fresh-pop"]


@pytest.mark.django_db(transaction=True)  # the housekeeping closes its own connections
def test_the_servers_housekeeping_forgets_old_keys_and_sends_start_nothing(
    api: ApiCall, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = _send(api, idempotency_key="old")["message_id"]
    Message.objects.filter(pk=old).update(created_at=timezone.now() - timedelta(hours=25))

    _send(api)
    assert Message.objects.get(pk=old).idempotency_key == "old"  # a send purges nothing
    housekeeping_schedule()
    housekeeping_schedule()  # queued once, however often the server starts

    tasks_run_due()

    assert Message.objects.get(pk=old).idempotency_key is None
    [following] = housekeeping_queued()
    due_in = (following.run_after - timezone.now()).total_seconds()
    assert 0.85 * HOUSEKEEPING_EVERY_SECONDS <= due_in <= 1.1 * HOUSEKEEPING_EVERY_SECONDS


def test_a_repeated_pop_over_mcp_answers_the_same(mcp: RawMcp, api: ApiCall) -> None:
    _send(api)
    _send(api)

    once = mcp.call_tool("memory_message_pop", {**B, "request_id": "mcp-r"})["structuredContent"]
    again = mcp.call_tool("memory_message_pop", {**B, "request_id": "mcp-r"})["structuredContent"]

    assert once == again
    assert Message.objects.filter(state=Message.State.PENDING).count() == 1
