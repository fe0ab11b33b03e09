"""An anonymous caller is let in before anyone asks whether the server is open, and asked
as late as it can be: by the access statement of send, pop and list, or alone before
anything else reads the caller; a closed server answers 401 on every path, changes
nothing and names no project (docs/operating.md#authentication)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from aimemory_site.lib.errors import Unauthorized
from messaging.models import Message
from projects.auth import OpenServerCheck
from projects.models import ApiToken, Project
from tests.conftest import ApiCall, Persona

SEND = {
    "to_workspace": "default",
    "to_project": "project-b",
    "from_workspace": "default",
    "from_project": "project-a",
    "body": "hello",
}
REFUSED = {
    "detail": "authentication required: send Authorization: Bearer <token>",
    "code": "unauthorized",
}
HOT_ROUTES = [
    ("post", "/api/v1/messages", SEND),
    ("post", "/api/v1/messages/pop", {"workspace": "default", "project": "project-b"}),
    ("get", "/api/v1/messages", {"workspace": "default", "project": "project-b"}),
]


def _token_statements(queries: list[dict[str, str]]) -> list[str]:
    return [q["sql"] for q in queries if ApiToken._meta.db_table in q["sql"]]


def test_anonymous_send_asks_the_open_server_question_in_its_access_query(
    api: ApiCall, project_a: Project, project_b: Project
) -> None:
    with CaptureQueriesContext(connection) as queries:
        status, _ = api("post", "/api/v1/messages", SEND)
    assert status == 201
    asked = _token_statements(queries.captured_queries)
    assert len(asked) == 1
    assert Project._meta.db_table in asked[0]  # the access statement, not one of its own


@pytest.mark.parametrize(("method", "path", "payload"), HOT_ROUTES)
def test_anonymous_caller_gets_401_on_a_hot_route_once_a_token_exists(
    api: ApiCall,
    project_a: Project,
    project_b: Project,
    alice: Persona,
    method: str,
    path: str,
    payload: dict[str, str],
) -> None:
    Message.objects.create(to_project=project_b, from_project=project_a, body="waiting")
    assert api(method, path, payload) == (401, REFUSED)
    assert Message.objects.get().state == Message.State.PENDING
    assert Message.objects.count() == 1


def test_anonymous_caller_gets_401_not_404_for_an_unknown_project_once_a_token_exists(
    api: ApiCall, alice: Persona
) -> None:
    status, body = api("post", "/api/v1/messages/pop", {"workspace": "x", "project": "nowhere"})
    assert (status, body) == (401, REFUSED)


@pytest.mark.django_db
def test_anonymous_caller_gets_404_for_an_unknown_project_on_an_open_server(api: ApiCall) -> None:
    status, body = api("post", "/api/v1/messages/pop", {"workspace": "x", "project": "nowhere"})
    assert (status, body["code"]) == (404, "project_not_found")


@pytest.mark.parametrize(
    ("path", "payload"),
    [
        ("/api/v1/messages", {**SEND, "body": 5}),  # refused by the schema: 422 when open
        ("/api/v1/messages", {**SEND, "in_reply_to": "not-an-id"}),  # by the domain: 400
        ("/api/v1/messages/cancel", {"workspace": "default", "project": "project-a"}),  # 400
    ],
)
def test_a_refused_body_answers_401_once_a_token_exists(
    api: ApiCall,
    project_a: Project,
    project_b: Project,
    alice: Persona,
    path: str,
    payload: dict[str, object],
) -> None:
    assert api("post", path, payload) == (401, REFUSED)


@pytest.mark.django_db
def test_a_refused_body_keeps_its_own_answer_on_an_open_server(
    api: ApiCall, project_a: Project, project_b: Project
) -> None:
    assert api("post", "/api/v1/messages", {**SEND, "body": 5})[0] == 422
    assert api("post", "/api/v1/messages", {**SEND, "in_reply_to": "x"})[0] == 400


def test_a_route_that_reads_its_caller_first_asks_before_it_acts(
    api: ApiCall, project_a: Project, project_b: Project, alice: Persona
) -> None:
    message = Message.objects.create(to_project=project_b, from_project=project_a, body="x")
    payload = {"workspace": "default", "project": "project-a", "message_id": str(message.id)}
    assert api("post", "/api/v1/messages/cancel", payload) == (401, REFUSED)
    assert Message.objects.get().state == Message.State.PENDING


@pytest.mark.django_db
def test_the_check_asks_once_and_a_refusal_stands_without_asking_again(alice: Persona) -> None:
    assert not OpenServerCheck().answered
    check = OpenServerCheck()
    with pytest.raises(Unauthorized):
        check.confirm()
    assert check.answered
    with CaptureQueriesContext(connection) as queries, pytest.raises(Unauthorized):
        check.confirm()
    assert queries.captured_queries == []


@pytest.mark.django_db
def test_a_settled_open_server_is_not_asked_again() -> None:
    check = OpenServerCheck()
    check.settle(False)
    with CaptureQueriesContext(connection) as queries:
        check.confirm()
    assert check.answered
    assert queries.captured_queries == []
