"""The messaging JSON API: shapes, status codes and the acceptance cases over HTTP."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from aimemory_site.api import hooks_api
from messaging.models import Message
from messaging.notices import SECURITY_NOTICE
from projects.models import Activity, Project
from tests.conftest import SEND, A, ApiCall, B, Persona


def _send(api: ApiCall, token: str | None = None, **changes: Any) -> str:
    status, body = api("post", "/api/v1/messages", {**SEND, **changes}, token=token)
    assert status == 201, body
    message_id: str = body["message_id"]
    return message_id


def test_send_list_pop_delivers_to_recipient_exactly_once(
    api: ApiCall, project_a: Project, project_b: Project
) -> None:
    message_id = _send(api)
    status, listed = api("get", "/api/v1/messages", B)
    assert status == 200
    [row] = listed["messages"]
    assert row["id"] == message_id
    assert row["from_project_id"] == str(project_a.id)
    assert (row["from_workspace"], row["from_project"]) == ("default", "project-a")
    assert (row["to_workspace"], row["to_project"]) == ("default", "project-b")
    assert row["state"] == "pending"
    assert row["claimed_at"] is None
    assert row["from_owner_user"] is None
    assert set(row) == {
        "id", "state", "to_workspace", "to_project", "to_workspace_id", "to_project_id",
        "from_workspace", "from_project", "from_workspace_id", "from_project_id",
        "from_agent", "from_owner_user", "subject", "in_reply_to", "decision",
        "decision_reply", "body", "created_at", "claimed_at", "expires_at",
    }  # fmt: skip
    assert row["decision"] is None and row["decision_reply"] is None

    status, popped = api("post", "/api/v1/messages/pop", B)
    assert status == 200
    assert popped["security_notice"] == SECURITY_NOTICE
    assert popped["message"]["id"] == message_id
    assert popped["message"]["state"] == "claimed"
    assert popped["message"]["claimed_at"] is not None
    assert popped["message"]["body"] == SEND["body"]

    assert api("post", "/api/v1/messages/pop", B) == (200, {"message": None})
    assert api("get", "/api/v1/messages", B) == (200, {"messages": []})


def test_a_non_recipient_cannot_pop_the_recipients_mail(
    api: ApiCall, project_a: Project, project_b: Project, project_c: Project
) -> None:
    message_id = _send(api)
    c = {"workspace": "default", "project": "project-c"}
    assert api("post", "/api/v1/messages/pop", c) == (200, {"message": None})
    assert api("post", "/api/v1/messages/pop", {**c, "message_id": message_id}) == (
        200,
        {"message": None},
    )
    assert api("post", "/api/v1/messages/pop", B)[1]["message"]["id"] == message_id


def test_outbox_lists_what_a_project_sent(
    api: ApiCall, project_a: Project, project_b: Project
) -> None:
    message_id = _send(api)
    assert [
        m["id"] for m in api("get", "/api/v1/messages", {**A, "box": "outbox"})[1]["messages"]
    ] == [message_id]
    assert api("get", "/api/v1/messages", A)[1] == {"messages": []}


def test_list_is_oldest_first_and_clamps_the_limit(
    api: ApiCall, project_a: Project, project_b: Project
) -> None:
    ids = [_send(api, body=f"request {i}") for i in range(3)]
    assert [m["id"] for m in api("get", "/api/v1/messages", B)[1]["messages"]] == ids
    assert len(api("get", "/api/v1/messages", {**B, "limit": 0})[1]["messages"]) == 1
    assert len(api("get", "/api/v1/messages", {**B, "limit": 1000})[1]["messages"]) == 3


def test_list_rejects_an_unknown_box(api: ApiCall, project_b: Project) -> None:
    status, body = api("get", "/api/v1/messages", {**B, "box": "trash"})
    assert status == 400
    assert body == {"detail": 'box must be "inbox" or "outbox", got "trash"', "code": "invalid_box"}


def test_sender_can_cancel_a_pending_message(
    api: ApiCall, project_a: Project, project_b: Project
) -> None:
    message_id = _send(api)
    assert api("post", "/api/v1/messages/cancel", {**A, "message_id": message_id}) == (
        200,
        {"cancelled": 1},
    )
    assert api("post", "/api/v1/messages/pop", B) == (200, {"message": None})


def test_recipient_cannot_cancel_the_senders_message(
    api: ApiCall, project_a: Project, project_b: Project
) -> None:
    message_id = _send(api)
    assert api("post", "/api/v1/messages/cancel", {**B, "message_id": message_id}) == (
        200,
        {"cancelled": 0},
    )
    assert api("post", "/api/v1/messages/cancel", {**B, "all": True}) == (200, {"cancelled": 0})
    assert api("post", "/api/v1/messages/pop", B)[1]["message"]["id"] == message_id


@pytest.mark.parametrize(
    "payload",
    [{}, {"all": True, "message_id": "0190a1b2-0000-7000-8000-000000000000"}, {"all": False}],
)
def test_cancel_needs_exactly_one_target(
    api: ApiCall, project_a: Project, payload: dict[str, Any]
) -> None:
    status, body = api("post", "/api/v1/messages/cancel", {**A, **payload})
    assert status == 400
    assert body["code"] == "cancel_target"


@pytest.mark.parametrize("route", ["/api/v1/messages/pop", "/api/v1/messages/cancel"])
def test_a_malformed_message_id_is_a_400(api: ApiCall, project_a: Project, route: str) -> None:
    status, body = api("post", route, {**A, "message_id": "not-a-uuid"})
    assert status == 400
    assert body["code"] == "invalid_message_id"


def test_unknown_recipient_is_a_404_and_writes_nothing(api: ApiCall, project_a: Project) -> None:
    status, body = api("post", "/api/v1/messages", {**SEND, "to_project": "project-typo"})
    assert status == 404
    assert body["code"] == "project_not_found"
    assert not Message.objects.exists()
    assert not Activity.objects.filter(kind=Activity.Kind.MESSAGE_SENT).exists()


def test_full_inbox_is_a_409(api: ApiCall, project_a: Project, project_b: Project) -> None:
    Message.objects.bulk_create(
        Message(to_project=project_b, from_project=project_a, body="x") for _ in range(256)
    )
    status, body = api("post", "/api/v1/messages", SEND)
    assert status == 409
    assert body["code"] == "inbox_full"
    assert Message.objects.count() == 256


@pytest.mark.parametrize(
    ("change", "field"),
    [({"body": 42}, "body"), ({"to_project": None}, "to_project"), ({"extra": 1}, "extra")],
)
def test_mistyped_send_is_a_422_and_writes_nothing(
    api: ApiCall, project_a: Project, project_b: Project, change: dict[str, Any], field: str
) -> None:
    status, body = api("post", "/api/v1/messages", {**SEND, **change})
    assert status == 422
    assert body["code"] == "validation_error"
    assert field in body["detail"]
    assert isinstance(body["errors"], list)
    assert not Message.objects.exists()


def test_empty_body_is_a_400(api: ApiCall, project_a: Project, project_b: Project) -> None:
    status, body = api("post", "/api/v1/messages", {**SEND, "body": "  "})
    assert (status, body["code"]) == (400, "empty_body")
    assert not Message.objects.exists()


def test_forbidden_send_is_a_403_and_writes_nothing(
    api: ApiCall, auth_on: str, alice: Persona, bob: Persona, alices_restricted: Project,
    alices_open: Project,
) -> None:  # fmt: skip
    payload = {**SEND, "to_project": "alpha", "from_project": "commons"}
    status, body = api("post", "/api/v1/messages", payload, token=bob.token)
    assert status == 403
    assert body["code"] == "write_access_required"
    assert not Message.objects.exists()


def test_owner_user_is_the_authenticated_user(
    api: ApiCall, alice: Persona, project_a: Project, project_b: Project
) -> None:
    _send(api, token=alice.token)
    [row] = api("get", "/api/v1/messages", B, token=alice.token)[1]["messages"]
    assert row["from_owner_user"] == "alice"


def test_briefing_pending_message_count_tracks_the_recipient_inbox(
    api: ApiCall, project_a: Project, project_b: Project
) -> None:
    def count(scope: dict[str, str]) -> int:
        n: int = api("get", "/api/v1/briefing", scope)[1]["pending_message_count"]
        return n

    _send(api)
    _send(api)
    assert (count(B), count(A)) == (2, 0)
    api("post", "/api/v1/messages/pop", B)
    assert count(B) == 1
    api("post", "/api/v1/messages/cancel", {**A, "all": True})
    assert count(B) == 0


def test_openapi_lists_every_route_with_its_errors(api: ApiCall) -> None:
    status, schema = api("get", "/api/v1/openapi.json")
    assert status == 200
    paths = schema["paths"]
    # every route: bad input, auth, origin, size, a request line too long
    errors = {"400", "401", "403", "413", "414", "422"}
    expected = {
        ("/api/v1/messages", "post"): {"201", "200", *errors, "404", "409", "415"},
        ("/api/v1/messages/{message_id}", "get"): {"200", *errors, "404"},
        ("/api/v1/messages", "get"): {"200", *errors, "404"},
        ("/api/v1/messages/pop", "post"): {"200", *errors, "404", "415"},
        ("/api/v1/messages/cancel", "post"): {"200", *errors, "404", "415"},
        ("/api/v1/briefing", "get"): {"200", *errors, "404"},
        ("/api/v1/sessions", "post"): {"200", *errors, "404", "409", "415"},
    }
    for (path, method), statuses in expected.items():
        assert set(paths[path][method]["responses"]) == statuses, (path, method)


def test_openapi_lists_the_414_of_a_request_line_too_long_on_every_route(api: ApiCall) -> None:
    """The server answers any route 414 ``request_line_too_long`` in the error shape
    before Django reads the request; the documents say so, the hook route's too."""
    status, schema = api("get", "/api/v1/openapi.json")
    assert status == 200
    documents = [schema, hooks_api.get_openapi_schema()]
    operations = [
        (path, method, operation)
        for document in documents
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
    ]

    assert ("/handoff", "get") in {(path, method) for path, method, _ in operations}
    for path, method, operation in operations:
        answer = {str(code): shape for code, shape in operation["responses"].items()}["414"]
        assert answer["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/ErrorOut"
        }, (path, method)


def test_a_message_without_subject_or_owner_shows_null(
    api: ApiCall, project_a: Project, project_b: Project
) -> None:
    payload = {key: value for key, value in SEND.items() if key != "subject"}
    assert api("post", "/api/v1/messages", payload)[0] == 201
    [row] = api("get", "/api/v1/messages", B)[1]["messages"]
    assert row["subject"] is None
    assert row["from_owner_user"] is None


def test_listing_costs_the_same_queries_for_one_message_or_many(
    api: ApiCall, project_a: Project, project_b: Project, project_c: Project
) -> None:
    def queries_to_list() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert api("get", "/api/v1/messages", B)[0] == 200
        return len(captured)

    _send(api)
    one = queries_to_list()
    for i in range(30):
        _send(api, from_project="project-c" if i % 2 else "project-a", body=f"request {i}")
    assert queries_to_list() == one
