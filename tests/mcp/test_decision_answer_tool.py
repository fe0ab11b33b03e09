"""``memory_decision_answer``: the person answers in their agent client, the model never
chooses (docs/reference.md#memory_decision_answer).

The mailbox is alice's restricted ``default/operator``, the asker her restricted
``default/orchestrator``; bob may write both, so whatever refuses him below is the form's
binding, not his rights. The official client (``mcp`` 2.3.0) runs against a live server;
the refusals are raw JSON-RPC, where the test controls every byte of the retry.
"""

from __future__ import annotations

from typing import Any

import anyio
import httpx2
import pytest
from django.core import signing
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, ElicitRequestFormParams, ElicitRequestParams, ElicitResult
from pytest_django.fixtures import Settings as SettingsWrapper
from pytest_django.live_server_helper import LiveServer

from messaging.answer_services import ANSWER_STATE_SALT
from messaging.models import Message
from projects.models import Grant, Project
from tests.conftest import Persona, make_project
from tests.decision_examples import question_send
from tests.mcp_raw import RawMcp

TOOL = "memory_decision_answer"
OPERATOR = {"workspace": "default", "project": "operator"}
QUESTION = "Accept the known-flake exception on the export test?"
DETAILS = "The export test failed three times this week, each time on a slow runner."
OPTIONS: list[dict[str, Any]] = [
    {"id": "accept", "label": "Accept the exception", "recommended": False},
    {"id": "reject", "label": "Send it back", "recommended": True},
    {"id": "later", "label": "Decide next week", "description": "Keep it open."},
]
ELICITS: dict[str, Any] = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
PUBLIC_URL = "https://memory.example.test"


@pytest.fixture
def mailbox(alice: Persona, bob: Persona) -> Project:
    operator = make_project(alice, "default", "operator", restricted=True)
    orchestrator = make_project(alice, "default", "orchestrator", restricted=True)
    for project in (operator, orchestrator):
        Grant.objects.create(user=bob.user, project=project, level=Grant.Level.WRITE)
    return operator


def ask(*, requires_root: bool = False) -> Message:
    """The orchestrator's question in the operator's inbox, sent by root."""
    return question_send(QUESTION, OPTIONS, requires_root=requires_root, details=DETAILS)


def replies() -> list[Message]:
    return list(Message.objects.filter(subject__startswith="decision-reply:"))


# The official client against a live server ----------------------------------------------


def run_client(
    live_server: LiveServer,
    persona: Persona,
    arguments: dict[str, Any],
    *,
    mode: str = "2026-07-28",
    answer: ElicitResult | None = None,
) -> tuple[CallToolResult, list[ElicitRequestParams]]:
    """Call the tool as ``persona``; with ``answer``, the client elicits and the person
    answers so. Returns the result and the forms the person was shown."""
    shown: list[ElicitRequestParams] = []

    async def person(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        shown.append(params)
        assert answer is not None
        return answer

    async def main() -> CallToolResult:
        headers = {"Authorization": f"Bearer {persona.token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            Client(
                streamable_http_client(f"{live_server.url}/mcp", http_client=http),
                mode=mode,
                elicitation_callback=person if answer is not None else None,
            ) as client,
        ):
            return await client.call_tool(TOOL, arguments)

    return anyio.run(main), shown


def structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    payload: dict[str, Any] | None = result.structured_content
    assert payload is not None
    return payload


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("mode", ["2026-07-28", "auto"])
def test_the_person_answers_in_a_form_and_the_reply_arrives_via_elicitation(
    live_server: LiveServer, auth_on: str, alice: Persona, mailbox: Project, mode: str
) -> None:
    question = ask()
    answer = ElicitResult(action="accept", content={"option": "later", "comment": "Next sprint."})

    result, shown = run_client(
        live_server, alice, {**OPERATOR, "question_id": str(question.pk)}, mode=mode, answer=answer
    )

    payload = structured(result)
    [form] = shown
    assert isinstance(form, ElicitRequestFormParams)
    assert form.message == f"{QUESTION}\n\n{DETAILS}"
    schema = dict(form.requested_schema)
    assert schema["required"] == ["option"]
    assert set(schema["properties"]) == {"option", "comment"}
    option = schema["properties"]["option"]
    assert option["type"] == "string"
    assert option["oneOf"] == [
        {"const": "accept", "title": "Accept the exception"},
        {"const": "reject", "title": "Send it back"},
        {"const": "later", "title": "Decide next week"},
    ]
    assert option["default"] == "reject"
    assert schema["properties"]["comment"]["type"] == "string"
    [reply] = replies()
    assert payload == {"message_id": str(reply.pk), "decision_reply": reply.decision_reply}
    assert reply.decision_reply == {
        "question_id": str(question.pk),
        "option": "later",
        "comment": "Next sprint.",
        "accepted": True,
        "refusal": None,
        "via": "elicitation",
    }
    assert reply.from_owner_user == "alice"
    assert reply.in_reply_to == question.pk
    assert (reply.from_project.name, reply.to_project.name) == ("operator", "orchestrator")
    question.refresh_from_db()
    assert question.state == Message.State.PENDING  # answering never pops the question


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_decline_or_cancel_sends_nothing_and_says_so(
    live_server: LiveServer, auth_on: str, alice: Persona, mailbox: Project, action: str
) -> None:
    question = ask()

    result, shown = run_client(
        live_server,
        alice,
        {**OPERATOR, "question_id": str(question.pk)},
        answer=ElicitResult(action=action),  # type: ignore[arg-type]
    )

    payload = structured(result)
    assert len(shown) == 1
    assert payload["message_id"] is None
    assert payload["action"] == action
    assert "nothing was sent" in payload["note"]
    assert replies() == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("mode", "elicits"),
    [("2026-07-28", False), ("legacy", True), ("legacy", False)],
    ids=["modern-without-elicitation", "initialize-era-with-it", "initialize-era-without"],
)
@pytest.mark.parametrize("public_url", [PUBLIC_URL, ""])
def test_a_client_that_cannot_elicit_gets_the_answer_page_and_nothing_is_sent(
    live_server: LiveServer,
    settings: SettingsWrapper,
    auth_on: str,
    alice: Persona,
    mailbox: Project,
    mode: str,
    elicits: bool,
    public_url: str,
) -> None:
    settings.AI_MEMORY_PUBLIC_URL = public_url
    question = ask()
    never = ElicitResult(action="accept", content={"option": "accept"}) if elicits else None

    result, shown = run_client(
        live_server, alice, {**OPERATOR, "question_id": str(question.pk)}, mode=mode, answer=never
    )

    payload = structured(result)
    assert shown == []
    assert payload["message_id"] is None
    if public_url:
        page = f"{PUBLIC_URL}/web/w/default/operator/decisions/{question.pk}/"
        assert payload["answer_page_url"] == page
        assert page in payload["note"]
    else:
        assert payload["answer_page_url"] is None
        assert "AI_MEMORY_PUBLIC_URL" in payload["note"]
    assert replies() == []


# Raw JSON-RPC: the retries a real client never sends ------------------------------------


def call(
    modern: RawMcp,
    persona: Persona,
    arguments: dict[str, Any],
    *,
    meta: dict[str, Any] | None = ELICITS,
    **retry: Any,
) -> dict[str, Any]:
    """One ``tools/call`` of the tool as ``persona``, from a client that elicits."""
    params = {"name": TOOL, "arguments": arguments, **retry}
    headers = {"Authorization": f"Bearer {persona.token}"}
    result: dict[str, Any] = modern.result("tools/call", params, headers=headers, meta=meta)
    return result


def form_for(modern: RawMcp, persona: Persona, question: Message) -> dict[str, Any]:
    """The input_required answer to a first call."""
    result = call(modern, persona, {**OPERATOR, "question_id": str(question.pk)})
    assert result["resultType"] == "input_required", result
    return result


def accept(option: str, comment: str | None = None) -> dict[str, Any]:
    content = {"option": option} if comment is None else {"option": option, "comment": comment}
    return {"decision": {"action": "accept", "content": content}}


def retry(
    modern: RawMcp,
    persona: Persona,
    question: Message,
    state: str,
    responses: dict[str, Any],
) -> dict[str, Any]:
    arguments = {**OPERATOR, "question_id": str(question.pk)}
    return call(modern, persona, arguments, requestState=state, inputResponses=responses)


def error_text(result: dict[str, Any]) -> str:
    assert result["isError"] is True, result
    assert result["resultType"] == "complete"
    text: str = result["content"][0]["text"]
    return text


@pytest.mark.django_db
def test_the_first_call_asks_for_one_form_and_an_opaque_state(
    modern: RawMcp, auth_on: str, alice: Persona, mailbox: Project
) -> None:
    question = ask()

    result = form_for(modern, alice, question)

    assert set(result) == {"resultType", "inputRequests", "requestState", "_meta"}
    [(key, request)] = result["inputRequests"].items()
    assert request["method"] == "elicitation/create"
    assert request["params"]["mode"] == "form"
    assert request["params"]["message"] == f"{QUESTION}\n\n{DETAILS}"
    assert str(question.pk) not in result["requestState"]  # compressed and signed
    assert replies() == []
    # The retry names the form by the same key.
    reply = retry(modern, alice, question, result["requestState"], {key: accept("reject")[key]})
    assert reply["isError"] is False
    assert [r.decision_reply["option"] for r in replies()] == ["reject"]  # type: ignore[index]


@pytest.mark.django_db
def test_a_replayed_state_sends_nothing_more(
    modern: RawMcp, auth_on: str, alice: Persona, mailbox: Project
) -> None:
    question = ask()
    state = form_for(modern, alice, question)["requestState"]
    first = retry(modern, alice, question, state, accept("accept"))
    assert first["isError"] is False

    text = error_text(retry(modern, alice, question, state, accept("accept", "again")))

    assert text.startswith("this answer form was answered already")
    assert [str(r.pk) for r in replies()] == [first["structuredContent"]["message_id"]]


@pytest.mark.django_db
@pytest.mark.parametrize("how", ["flipped", "foreign-salt", "other-question", "garbage"])
def test_a_tampered_state_sends_nothing(
    modern: RawMcp, auth_on: str, alice: Persona, mailbox: Project, how: str
) -> None:
    question = ask()
    other = ask()
    state = form_for(modern, alice, question)["requestState"]
    claims = signing.loads(state, salt=ANSWER_STATE_SALT)
    forged = {
        "flipped": state[:-3] + ("AAA" if not state.endswith("AAA") else "BBB"),
        "foreign-salt": signing.dumps(claims, salt="another.purpose", compress=True),
        # Another question's payload under this state's timestamp and signature.
        "other-question": ":".join(
            [
                signing.dumps({**claims, "q": str(other.pk)}, salt=ANSWER_STATE_SALT).split(":")[0],
                *state.split(":")[1:],
            ]
        ),
        "garbage": "not-a-state",
    }[how]

    text = error_text(retry(modern, alice, question, forged, accept("accept")))

    assert "not one this server issued to you" in text
    assert replies() == []


@pytest.mark.django_db
def test_a_state_for_another_question_sends_nothing(
    modern: RawMcp, auth_on: str, alice: Persona, mailbox: Project
) -> None:
    question, other = ask(), ask()
    state = form_for(modern, alice, other)["requestState"]

    text = error_text(retry(modern, alice, question, state, accept("accept")))

    assert "not one this server issued to you" in text
    assert replies() == []


@pytest.mark.django_db
def test_a_state_issued_to_another_principal_sends_nothing(
    modern: RawMcp, auth_on: str, alice: Persona, bob: Persona, mailbox: Project
) -> None:
    question = ask()
    alices = form_for(modern, alice, question)["requestState"]

    text = error_text(retry(modern, bob, question, alices, accept("accept")))

    assert "not one this server issued to you" in text
    assert replies() == []
    # bob may answer on his own form: the refusal was the binding, not his rights.
    bobs = form_for(modern, bob, question)["requestState"]
    assert retry(modern, bob, question, bobs, accept("accept"))["isError"] is False


@pytest.mark.django_db
def test_an_expired_state_sends_nothing(
    modern: RawMcp,
    auth_on: str,
    alice: Persona,
    mailbox: Project,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    question = ask()
    now = signing.TimestampSigner().timestamp()
    eleven_minutes_ago = signing.b62_encode(signing.b62_decode(now) - 11 * 60)
    with monkeypatch.context() as patched:
        patched.setattr(signing.TimestampSigner, "timestamp", lambda self: eleven_minutes_ago)
        state = form_for(modern, alice, question)["requestState"]

    text = error_text(retry(modern, alice, question, state, accept("accept")))

    assert "expired" in text
    assert replies() == []


@pytest.mark.django_db
@pytest.mark.parametrize("content", [{"option": "merge"}, {}, {"option": 1}, None])
def test_an_accept_without_an_offered_option_sends_nothing(
    modern: RawMcp, auth_on: str, alice: Persona, mailbox: Project, content: Any
) -> None:
    question = ask()
    state = form_for(modern, alice, question)["requestState"]
    answer = {"decision": {"action": "accept", "content": content}}

    text = error_text(retry(modern, alice, question, state, answer))

    assert "accept, reject, later" in text
    assert replies() == []
    # The state sent nothing, so the person may still answer with it.
    assert retry(modern, alice, question, state, accept("accept"))["isError"] is False


@pytest.mark.django_db
@pytest.mark.parametrize(
    "retried",
    [
        {"inputResponses": {"decision": {"action": "accept", "content": {"option": "accept"}}}},
        {"requestState": "state-only"},
        {"inputResponses": {"other": {"action": "accept"}}, "requestState": "s"},
        {"inputResponses": {"decision": {"action": "approve"}}, "requestState": "s"},
    ],
    ids=["no-state", "no-answer", "another-key", "unknown-action"],
)
def test_a_retry_missing_its_state_or_answer_sends_nothing(
    modern: RawMcp, auth_on: str, alice: Persona, mailbox: Project, retried: dict[str, Any]
) -> None:
    question = ask()
    form_for(modern, alice, question)

    result = call(modern, alice, {**OPERATOR, "question_id": str(question.pk)}, **retried)

    assert "nothing was sent" in error_text(result)
    assert replies() == []


@pytest.mark.django_db
def test_a_declined_form_with_a_tampered_state_is_refused(
    modern: RawMcp, auth_on: str, alice: Persona, mailbox: Project
) -> None:
    question = ask()
    state = form_for(modern, alice, question)["requestState"]

    text = error_text(
        retry(modern, alice, question, state + "x", {"decision": {"action": "decline"}})
    )

    assert "not one this server issued to you" in text


@pytest.mark.django_db
def test_who_may_answer_is_the_answer_pages_rule_before_any_form(
    modern: RawMcp, auth_on: str, alice: Persona, mailbox: Project
) -> None:
    question = ask(requires_root=True)

    text = error_text(call(modern, alice, {**OPERATOR, "question_id": str(question.pk)}))

    assert text.startswith("this question requires root")
    assert replies() == []


@pytest.mark.django_db
def test_an_answered_question_shows_no_form(
    modern: RawMcp, auth_on: str, alice: Persona, mailbox: Project
) -> None:
    question = ask()
    state = form_for(modern, alice, question)["requestState"]
    retry(modern, alice, question, state, accept("accept"))

    text = error_text(call(modern, alice, {**OPERATOR, "question_id": str(question.pk)}))

    assert text.startswith("this question was answered already")
    assert len(replies()) == 1


@pytest.mark.django_db
def test_an_inferred_scope_is_refused_like_pop(
    modern: RawMcp, auth_on: str, alice: Persona, mailbox: Project
) -> None:
    question = ask()

    text = error_text(call(modern, alice, {"question_id": str(question.pk)}))

    assert text.startswith("refusing to answer a decision from default/default")


@pytest.mark.django_db
def test_without_the_capability_a_raw_client_gets_the_url_result(
    modern: RawMcp, settings: SettingsWrapper, auth_on: str, alice: Persona, mailbox: Project
) -> None:
    settings.AI_MEMORY_PUBLIC_URL = PUBLIC_URL
    question = ask()
    url_only: dict[str, Any] = {
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"url": {}}}
    }

    result = call(modern, alice, {**OPERATOR, "question_id": str(question.pk)}, meta=url_only)

    assert result["resultType"] == "complete"
    assert result["isError"] is False
    assert result["structuredContent"]["answer_page_url"].startswith(PUBLIC_URL)
    assert replies() == []
