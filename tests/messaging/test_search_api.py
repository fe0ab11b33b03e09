"""``GET /api/v1/messages/search`` and ``GET /api/v1/messages/<id>/thread``: the shapes,
the boxes, the limits, who may search what, and what a search costs.

How words match (stems, stop words, FTS syntax) is the data layer's to test; here the
routes are checked as adapters: they answer what the selectors find, as the contract
shapes it (docs/reference.md#search-and-threads).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from messaging.models import Message
from projects.models import Project
from tests.conftest import SEND, A, ApiCall, B, Persona, make_project

SEARCH = "/api/v1/messages/search"
C = {"workspace": "default", "project": "project-c"}
# A message as list gives it, without its body: every row of a search or a thread.
HEAD_KEYS = {
    "id", "state", "to_workspace", "to_project", "to_workspace_id", "to_project_id",
    "from_workspace", "from_project", "from_workspace_id", "from_project_id",
    "from_agent", "from_owner_user", "subject", "in_reply_to", "decision",
    "decision_reply", "created_at", "claimed_at", "expires_at",
}  # fmt: skip


def _send(api: ApiCall, token: str | None = None, **changes: Any) -> str:
    status, body = api("post", "/api/v1/messages", {**SEND, **changes}, token=token)
    assert status == 201, body
    message_id: str = body["message_id"]
    return message_id


def _search(
    api: ApiCall, scope: dict[str, str], q: str, *, token: str | None = None, **params: Any
) -> list[dict[str, Any]]:
    status, body = api("get", SEARCH, {**scope, "q": q, **params}, token=token)
    assert status == 200, body
    assert set(body) == {"messages"}
    hits: list[dict[str, Any]] = body["messages"]
    return hits


def _ids(hits: list[dict[str, Any]]) -> list[str]:
    return [hit["id"] for hit in hits]


def _thread(message_id: str) -> str:
    return f"/api/v1/messages/{message_id}/thread"


@pytest.fixture
def projects(project_a: Project, project_b: Project, project_c: Project) -> None:
    """default/project-a, -b and -c on an anonymous server."""


# ---- search -----------------------------------------------------------------------------


@pytest.mark.usefixtures("projects")
def test_a_hit_is_the_message_without_its_body_plus_a_snippet(api: ApiCall) -> None:
    message_id = _send(api, body="Please deploy the export endpoint on Friday.")

    [hit] = _search(api, B, "deploy")

    assert hit["id"] == message_id
    assert set(hit) == HEAD_KEYS | {"snippet"}
    assert (hit["from_project"], hit["to_project"], hit["state"]) == (
        "project-a",
        "project-b",
        "pending",
    )
    assert "[deploy]" in hit["snippet"].lower()
    assert len(hit["snippet"]) <= 200


@pytest.mark.usefixtures("projects")
def test_the_subject_is_searched_too(api: ApiCall) -> None:
    message_id = _send(api, subject="quarterly invoices", body="See the attached numbers.")

    assert _ids(_search(api, B, "invoices")) == [message_id]


@pytest.mark.usefixtures("projects")
def test_the_box_chooses_inbox_outbox_or_both(api: ApiCall) -> None:
    received = _send(api, body="export request one")
    sent = _send(api, from_project="project-b", to_project="project-a", body="export answer two")

    inbox = _ids(_search(api, B, "export"))
    outbox = _ids(_search(api, B, "export", box="outbox"))
    both = _ids(_search(api, B, "export", box="all"))

    assert inbox == _ids(_search(api, B, "export", box="inbox")) == [received]
    assert outbox == [sent]
    assert sorted(both) == sorted([received, sent])
    assert _ids(_search(api, C, "export", box="all")) == []


@pytest.mark.usefixtures("projects")
def test_every_stored_state_is_found_and_a_search_changes_none(api: ApiCall) -> None:
    claimed = _send(api, body="invoice one")
    assert api("post", "/api/v1/messages/pop", {**B, "message_id": claimed})[0] == 200
    cancelled = _send(api, body="invoice two")
    assert api("post", "/api/v1/messages/cancel", {**A, "message_id": cancelled})[0] == 200
    pending = _send(api, body="invoice three")
    before = {str(m.id): (m.state, m.claimed_at, m.cancelled_at) for m in Message.objects.all()}

    hits = _search(api, B, "invoice", box="all")

    assert {hit["id"]: hit["state"] for hit in hits} == {
        claimed: "claimed",
        cancelled: "cancelled",
        pending: "pending",
    }
    after = {str(m.id): (m.state, m.claimed_at, m.cancelled_at) for m in Message.objects.all()}
    assert after == before


@pytest.mark.usefixtures("projects")
def test_the_limit_defaults_to_20_and_cuts_the_best_matches(api: ApiCall) -> None:
    for n in range(22):
        _send(api, body=f"report number {n}")

    assert len(_search(api, B, "report")) == 20
    assert len(_search(api, B, "report", limit=3)) == 3
    assert len(_search(api, B, "report", limit=1000)) == 22


@pytest.mark.usefixtures("projects")
@pytest.mark.parametrize("q", ["the", "?!", '"', "*", "NEAR", "a:b", "-", "' OR 1=1 --"])
def test_a_query_of_stop_words_or_syntax_is_no_error(api: ApiCall, q: str) -> None:
    _send(api, body="the quick brown fox")

    assert _search(api, B, q) == []


@pytest.mark.usefixtures("projects")
def test_a_query_over_500_characters_is_400_invalid_query(api: ApiCall) -> None:
    status, body = api("get", SEARCH, {**B, "q": "x" * 501})

    assert status == 400
    assert body["code"] == "invalid_query"
    assert _search(api, B, "x" * 500) == []


@pytest.mark.usefixtures("projects")
def test_an_unknown_box_is_400_invalid_box(api: ApiCall) -> None:
    status, body = api("get", SEARCH, {**B, "q": "export", "box": "trash"})

    assert status == 400
    assert body["code"] == "invalid_box"


@pytest.mark.usefixtures("projects")
def test_search_is_its_own_route_not_a_message_id(api: ApiCall) -> None:
    """/messages/search is declared before /messages/{message_id}: without q it is the
    search's own 422, never the status route's invalid_message_id."""
    status, body = api("get", SEARCH, B)

    assert status == 422
    assert body["code"] == "validation_error"
    assert api("get", "/api/v1/messages/not-a-uuid", B)[1]["code"] == "invalid_message_id"


def test_an_unknown_project_is_404(api: ApiCall, db: None) -> None:
    status, body = api("get", SEARCH, {"workspace": "default", "project": "nowhere", "q": "x"})

    assert status == 404
    assert body["code"] == "project_not_found"


@pytest.mark.usefixtures("auth_on")
def test_charlie_gets_the_same_404_for_a_project_he_cannot_read_as_for_a_missing_one(
    api: ApiCall, alice: Persona, charlie: Persona, alices_restricted: Project
) -> None:
    make_project(alice, "default", "beta")
    _send(api, alice.token, from_project="beta", to_project="alpha", body="secret plans")

    hidden = api("get", SEARCH, {"workspace": "default", "project": "alpha", "q": "plans"},
                 token=charlie.token)  # fmt: skip
    missing = api("get", SEARCH, {"workspace": "default", "project": "nope", "q": "plans"},
                  token=charlie.token)  # fmt: skip

    assert hidden[0] == missing[0] == 404
    assert hidden[1]["code"] == missing[1]["code"] == "project_not_found"
    assert hidden[1]["detail"].replace("alpha", "nope") == missing[1]["detail"]


@pytest.mark.usefixtures("auth_on")
def test_a_read_grant_is_enough_to_search(
    api: ApiCall, alice: Persona, bob: Persona, alices_restricted: Project
) -> None:
    make_project(alice, "default", "beta")
    message_id = _send(
        api, alice.token, from_project="beta", to_project="alpha", body="rotate the keys"
    )
    alpha = {"workspace": "default", "project": "alpha"}

    assert _ids(_search(api, alpha, "rotate", token=bob.token)) == [message_id]
    # bob's search of a project of his own finds nothing of alpha's, however it ranks.
    make_project(bob, "default", "bobs")
    bobs = {"workspace": "default", "project": "bobs"}
    assert _search(api, bobs, "rotate", token=bob.token, box="all", limit=1) == []


@pytest.mark.usefixtures("projects")
def test_search_costs_the_same_queries_for_one_hit_or_many(
    api: ApiCall, django_assert_num_queries: Any
) -> None:
    def queries_to_search() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert api("get", SEARCH, {**B, "q": "request", "box": "all"})[0] == 200
        return len(captured)

    _send(api, body="request 0")
    one = queries_to_search()
    for n in range(1, 30):
        sender = "project-c" if n % 2 else "project-a"
        _send(api, from_project=sender, body=f"request {n}")

    assert queries_to_search() == one
    # The caller, the project, the ranked ids with their snippets, the rows.
    with django_assert_num_queries(4):
        assert len(_search(api, B, "request", box="all", limit=100)) == 30


# ---- thread -----------------------------------------------------------------------------


@pytest.mark.usefixtures("projects")
def test_a_thread_is_every_reply_oldest_first_without_bodies(api: ApiCall) -> None:
    question = _send(api, subject="port?", body="Which port?")
    b_to_a = {"from_project": "project-b", "to_project": "project-a"}
    answer = _send(api, **b_to_a, in_reply_to=question, body="Port 8080.")
    thanks = _send(api, in_reply_to=answer, body="Thanks.")
    _send(api, body="Unrelated.")

    for member in (question, answer, thanks):
        status, body = api("get", _thread(member), B)
        assert status == 200, body
        assert set(body) == {"messages"}
        assert _ids(body["messages"]) == [question, answer, thanks]
        assert all(set(row) == HEAD_KEYS for row in body["messages"])
    assert [row["in_reply_to"] for row in api("get", _thread(question), A)[1]["messages"]] == [
        None,
        question,
        answer,
    ]


@pytest.mark.usefixtures("projects")
def test_a_thread_shows_only_the_callers_messages(api: ApiCall) -> None:
    """C sees the reply B sent it, not the question A sent B; the reply still names it."""
    question = _send(api, body="Which port?")
    forwarded = _send(api, from_project="project-b", to_project="project-c",
                      in_reply_to=question, body="Do you know the port?")  # fmt: skip

    status, body = api("get", _thread(forwarded), C)

    assert status == 200
    assert _ids(body["messages"]) == [forwarded]
    assert body["messages"][0]["in_reply_to"] == question


@pytest.mark.usefixtures("projects")
def test_a_thread_of_a_message_that_is_not_the_callers_is_404_as_status_answers(
    api: ApiCall,
) -> None:
    message_id = _send(api)
    unknown = "0190a1b2-0000-7000-8000-000000000000"

    for path in (_thread(message_id), _thread(unknown)):
        status, body = api("get", path, C)
        assert status == 404
        assert body["code"] == "message_not_found"
    # The same answer status gives for the same message and caller.
    assert (
        api("get", _thread(message_id), C)[1] == api("get", f"/api/v1/messages/{message_id}", C)[1]
    )
    assert api("get", _thread("not-a-uuid"), B)[1]["code"] == "invalid_message_id"


@pytest.mark.usefixtures("auth_on")
def test_charlie_cannot_read_the_thread_of_a_project_he_cannot_read(
    api: ApiCall, alice: Persona, charlie: Persona, alices_restricted: Project
) -> None:
    make_project(alice, "default", "beta")
    message_id = _send(api, alice.token, from_project="beta", to_project="alpha")

    status, body = api("get", _thread(message_id), {"workspace": "default", "project": "alpha"},
                       token=charlie.token)  # fmt: skip

    assert status == 404
    assert body["code"] == "project_not_found"


# ---- the document -----------------------------------------------------------------------


def test_openapi_documents_both_routes_with_their_errors(api: ApiCall) -> None:
    status, schema = api("get", "/api/v1/openapi.json")
    assert status == 200
    paths = schema["paths"]
    statuses = {"200", "400", "401", "403", "413", "414", "422", "404"}

    assert set(paths[SEARCH]["get"]["responses"]) == statuses
    assert set(paths["/api/v1/messages/{message_id}/thread"]["get"]["responses"]) == statuses
    parameters = {p["name"]: p for p in paths[SEARCH]["get"]["parameters"]}
    assert parameters["q"]["required"] is True
    assert parameters["q"]["schema"]["maxLength"] == 500
    assert parameters["box"]["schema"]["enum"] == ["inbox", "outbox", "all"]
