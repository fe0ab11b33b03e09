"""Operator decisions: the parser, the writer and the fields every message carries."""

from __future__ import annotations

from typing import Any

import pytest
from pytest_django.fixtures import Settings as SettingsWrapper

from aimemory_site.lib.decisions import (
    decision_body_write,
    decision_parse,
    decision_reply_parse,
    decision_reply_subject,
    decision_reply_write,
    decision_subject,
)
from messaging.models import Message
from projects.models import Grant, Project
from tests.conftest import SEND, A, ApiCall, B, Persona, make_project
from tests.decision_examples import MERGE_BODY, MERGE_DECISION, MERGE_SUBJECT
from tests.mcp_raw import RawMcp

SUBJECT = "decision: Accept the known-flake exception?"
QUESTION_ID = "018f1a2b-3c4d-7e5f-8a9b-0c1d2e3f4a5b"

# The product document's examples, verbatim.
FULL = """question: Accept the known-flake exception on the export test?
requires_root: false
reply_project: default/orchestrator
options:
- id: accept
  label: Accept the exception
  description: Land the change with the flake written down.
  recommended: true
- id: reject
  label: Send it back
  description: The test has to be stable first.
details: Failed once in forty CI runs. The flake is timed in the export suite.
links:
- https://example.test/pull/12"""
TERMINAL = FULL.split("\ndetails:")[0]
REPLY = f"""question_id: {QUESTION_ID}
option: accept
comment: Accepting the exception; the flake is already written down."""

ACCEPT = {
    "id": "accept",
    "label": "Accept the exception",
    "description": "Land the change with the flake written down.",
    "recommended": True,
}
REJECT = {
    "id": "reject",
    "label": "Send it back",
    "description": "The test has to be stable first.",
    "recommended": False,
}
EXPECTED: dict[str, Any] = {
    "question": "Accept the known-flake exception on the export test?",
    "requires_root": False,
    "reply_project": "default/orchestrator",
    "options": [ACCEPT, REJECT],
    "details": "Failed once in forty CI runs. The flake is timed in the export suite.",
    "links": ["https://example.test/pull/12"],
}


def test_the_product_documents_examples_parse() -> None:
    assert decision_parse(SUBJECT, FULL) == EXPECTED
    assert decision_parse(SUBJECT, TERMINAL) == {**EXPECTED, "details": None, "links": []}
    assert decision_reply_parse(f"decision-reply: {QUESTION_ID}", REPLY) == {
        "question_id": QUESTION_ID,
        "option": "accept",
        "comment": "Accepting the exception; the flake is already written down.",
    }


@pytest.mark.parametrize(
    ("body", "changes"),
    [
        pytest.param(FULL.replace("\n", "\r\n"), {}, id="crlf"),
        pytest.param(FULL.replace("\n  ", "\n\t"), {}, id="tab-indented"),
        pytest.param(
            FULL.replace("- id: ", "  - id: ")
            .replace("\n  label", "\n    label")
            .replace("\n  description", "\n    description")
            .replace("\n  recommended", "\n    recommended"),
            {},
            id="indented-list",
        ),
        pytest.param(
            FULL.replace(
                "question: Accept the known-flake exception on the export test?",
                'question: "Accept the known-flake exception on the export test?"',
            )
            .replace("label: Send it back", "label: 'Send it back'")
            .replace(
                "reply_project: default/orchestrator", 'reply_project: "default/orchestrator"'
            ),
            {},
            id="quoted-values",
        ),
        pytest.param(
            FULL.replace("requires_root: false", "requires_root: True").replace(
                "recommended: true", "recommended: yes"
            ),
            {"requires_root": True},
            id="True-and-yes",
        ),
        pytest.param(
            FULL.replace("requires_root: false", 'requires_root: "true"'),
            {"requires_root": True},
            id="requires-root-string",
        ),
        pytest.param(
            FULL.replace("id: accept", "id: 1").replace("id: reject", "id: 2"),
            {"options": [{**ACCEPT, "id": "1"}, {**REJECT, "id": "2"}]},
            id="int-ids",
        ),
        pytest.param(
            FULL.replace("options:", "priority: high\nowner: ci\noptions:").replace(
                "  recommended: true", "  recommended: true\n  cost: 3"
            ),
            {},
            id="extra-fields",
        ),
        pytest.param(
            "question: Ship it?\noptions:\n- id: yes-ship\n- id: no",
            {
                "question": "Ship it?",
                "reply_project": None,
                "options": [
                    {
                        "id": "yes-ship",
                        "label": "yes-ship",
                        "description": None,
                        "recommended": False,
                    },
                    {"id": "no", "label": "no", "description": None, "recommended": False},
                ],
                "details": None,
                "links": [],
            },
            id="missing-optional-fields",
        ),
        pytest.param(
            FULL.replace("  description: The test has to be stable first.\n", ""),
            {"options": [ACCEPT, {**REJECT, "description": None}]},
            id="option-without-description",
        ),
        pytest.param(
            FULL + "\n\nThanks! Ping me: I am around until five.",
            {},
            id="trailing-text",
        ),
        pytest.param(f"Here is the question:\n\n```yaml\n{FULL}\n```\n", {}, id="markdown-fence"),
        pytest.param(
            FULL.replace("label: Send it back", 'label: Send it back: #12 isn\'t "stable"').replace(
                "question: Accept the known-flake exception on the export test?",
                "question: Accept: the known-flake exception on the export test?",
            ),
            {
                "question": "Accept: the known-flake exception on the export test?",
                "options": [ACCEPT, {**REJECT, "label": 'Send it back: #12 isn\'t "stable"'}],
            },
            id="unquoted-colons-and-hash",
        ),
        pytest.param(
            FULL.replace("links:\n- https://example.test/pull/12", "links: https://x.test/1"),
            {"links": ["https://x.test/1"]},
            id="single-link",
        ),
    ],
)
def test_variants_agents_write_parse_sensibly(body: str, changes: dict[str, Any]) -> None:
    assert decision_parse(SUBJECT, body) == {**EXPECTED, **changes}


@pytest.mark.parametrize(
    ("subject", "body"),
    [
        pytest.param("Accept the exception?", FULL, id="no-prefix"),
        pytest.param(None, FULL, id="no-subject"),
        pytest.param("decision-reply: x", FULL, id="reply-prefix"),
        pytest.param(SUBJECT, "Please accept the exception, thanks.", id="prose"),
        pytest.param(SUBJECT, "question: [unclosed\noptions: {", id="broken-yaml"),
        pytest.param(SUBJECT, FULL.replace("question:", "prompt:"), id="question-missing"),
        pytest.param(SUBJECT, "question:\n  - a\n  - b", id="question-a-list"),
        pytest.param(
            SUBJECT,
            FULL.replace("requires_root: false", "requires_root: maybe"),
            id="requires-root-unreadable",
        ),
        pytest.param(SUBJECT, FULL.replace("- id: reject", "- label: no id"), id="option-no-id"),
        pytest.param(SUBJECT, "", id="empty"),
        pytest.param(SUBJECT, "- just\n- a list", id="a-list"),
        pytest.param(SUBJECT, "a: &a [*a]\n" * 3, id="recursive-alias"),
    ],
)
def test_non_decisions_give_none(subject: str | None, body: str) -> None:
    assert decision_parse(subject, body) is None


def test_a_reply_comment_spans_lines_and_keeps_its_colons() -> None:
    body = (
        f"question_id: {QUESTION_ID}\r\noption: reject\r\ncomment: Not yet: the suite\r\n"
        "option: accept\nnote: flaky twice: see #12\n\n  indented: still comment"
    )
    assert decision_reply_parse(f"  decision-reply: {QUESTION_ID}  ", body) == {
        "question_id": QUESTION_ID,
        "option": "reject",
        "comment": "Not yet: the suite\noption: accept\nnote: flaky twice: see #12\n\n"
        "  indented: still comment",
    }


def test_reply_variants_and_non_replies() -> None:
    subject = decision_reply_subject(QUESTION_ID)
    assert decision_reply_parse(subject, 'option: "accept"') == {
        "question_id": QUESTION_ID,
        "option": "accept",
        "comment": "",
    }
    block = f"question_id: {QUESTION_ID}\noption: accept\ncomment: |\n  line one\n  line two"
    assert decision_reply_parse(subject, block) == {
        "question_id": QUESTION_ID,
        "option": "accept",
        "comment": "line one\nline two",
    }
    assert decision_reply_parse(f"decision: {QUESTION_ID}", REPLY) is None
    assert decision_reply_parse(None, REPLY) is None
    assert decision_reply_parse("decision-reply: other-id", REPLY) is None
    assert decision_reply_parse(subject, "comment: option: accept") is None
    assert decision_reply_parse(subject, "Accepted, go ahead.") is None


def test_the_writer_emits_the_documents_layout() -> None:
    assert (
        decision_body_write(
            EXPECTED["question"],
            [ACCEPT, REJECT],
            requires_root=False,
            reply_project="default/orchestrator",
            details=EXPECTED["details"],
            links=EXPECTED["links"],
        )
        == FULL
    )
    assert decision_reply_write(QUESTION_ID, "accept", REPLY.split("comment: ")[1]) == REPLY
    assert decision_reply_subject(f" {QUESTION_ID} ") == f"decision-reply: {QUESTION_ID}"


def test_the_subject_is_one_line_within_200_characters() -> None:
    assert decision_subject("Ship\nit?") == "decision: Ship it?"
    long = decision_subject("why " * 100)
    assert len(long) == 200
    assert long.startswith("decision: why why")


AWKWARD = [
    'Fix: #12 isn\'t "done"',
    "'quoted' at the start",
    '"double" at the start',
    "# a comment?",
    "true",
    "42",
    "- a dash",
    "[brackets] and {braces}",
    "a: b: c",
    "trailing colon:",
    "ends with space ",
    "tab\there",
    "@at and `backtick`",
    "ünïcødé — “curly”",
    "null",
    "~",
    "*star &amp !bang %pct",
]


def test_the_writer_round_trips_awkward_text() -> None:
    options = [
        {"id": f"o{i}", "label": text, "description": text, "recommended": i == 0}
        for i, text in enumerate(AWKWARD)
    ]
    for text in AWKWARD:
        body = decision_body_write(
            text,
            [*options, {"id": text.strip(), "label": text, "description": None}],
            requires_root=True,
            reply_project="ws/proj",
            details=f"{text}\nsecond line: {text}",
            links=[f"https://x.test/{text}"],
        )
        parsed = decision_parse(decision_subject(text), body)
        assert parsed is not None, body
        assert parsed["question"] == " ".join(text.split())
        assert parsed["requires_root"] is True
        assert parsed["reply_project"] == "ws/proj"
        assert parsed["details"] == f"{text}\nsecond line: {text}".strip()
        assert parsed["links"] == [f"https://x.test/{text}".strip()]
        assert parsed["options"][:-1] == [
            {**o, "label": str(o["label"]).strip(), "description": str(o["description"]).strip()}
            for o in options
        ]
        assert parsed["options"][-1]["id"] == text.strip()

        reply = decision_reply_write(QUESTION_ID, text.strip(), f"{text}\nmore: {text}")
        assert decision_reply_parse(decision_reply_subject(QUESTION_ID), reply) == {
            "question_id": QUESTION_ID,
            "option": text.strip(),
            "comment": f"{text}\nmore: {text}".strip(),
        }
    for comment in ['"quoted"', "|", ">-\nfolded", "'x'"]:
        reply = decision_reply_write(QUESTION_ID, "accept", comment)
        parsed_reply = decision_reply_parse(decision_reply_subject(QUESTION_ID), reply)
        assert parsed_reply is not None
        assert parsed_reply["comment"] == comment


def test_a_question_lists_with_its_decision_and_a_popped_reply_carries_its_answer(
    api: ApiCall, project_a: Project, project_b: Project
) -> None:
    question = {
        "to_workspace": "default",
        "to_project": "project-b",
        "from_workspace": "default",
        "from_project": "project-a",
        "subject": MERGE_SUBJECT,
        "body": MERGE_BODY,
    }
    status, sent = api("post", "/api/v1/messages", question)
    assert status == 201, sent
    question_id = sent["message_id"]

    [row] = api("get", "/api/v1/messages", B)[1]["messages"]
    assert row["decision"] == MERGE_DECISION
    assert row["decision_reply"] is None
    keys = list(row)
    assert keys.index("in_reply_to") < keys.index("decision") < keys.index("decision_reply")
    assert keys.index("decision_reply") < keys.index("body")

    reply = {
        "to_workspace": "default",
        "to_project": "project-a",
        "from_workspace": "default",
        "from_project": "project-b",
        "subject": decision_reply_subject(question_id),
        "body": decision_reply_write(question_id, "merge", "Go: CI is green.\nThanks."),
    }
    assert api("post", "/api/v1/messages", reply)[0] == 201
    popped = api("post", "/api/v1/messages/pop", A)[1]["message"]
    assert popped["decision"] is None
    assert popped["decision_reply"] == {
        "question_id": question_id,
        "option": "merge",
        "comment": "Go: CI is green.\nThanks.",
        "accepted": True,
        "refusal": None,
        "via": "message",
    }


def test_an_ordinary_message_carries_null_decision_fields(
    api: ApiCall, project_a: Project, project_b: Project
) -> None:
    question = {
        "to_workspace": "default",
        "to_project": "project-b",
        "from_workspace": "default",
        "from_project": "project-a",
        "subject": "decision: but the body is prose",
        "body": "Please pick one: merge or wait.",
    }
    assert api("post", "/api/v1/messages", question)[0] == 201
    [row] = api("get", "/api/v1/messages", B)[1]["messages"]
    assert (row["decision"], row["decision_reply"]) == (None, None)


# Who may answer, decided at send -------------------------------------------------------
#
# alice's restricted default/operator is the mailbox and her restricted
# default/orchestrator the asker. bob writes both but is not root; charlie writes the asker
# from a project of his own, default/elsewhere. The question requires root.

ROOT_REFUSAL = (
    "the question requires root, and this reply was not sent by root (the root token, a "
    "superuser, or the user named by AI_MEMORY_ROOT_USERNAME)."
)


def _reply(question_id: str, option: str, sender: str, comment: str = "") -> dict[str, Any]:
    return {
        "to_workspace": "default",
        "to_project": "orchestrator",
        "from_workspace": "default",
        "from_project": sender,
        "subject": decision_reply_subject(question_id),
        "body": decision_reply_write(question_id, option, comment),
    }


@pytest.fixture
def answered(
    api: ApiCall, modern: RawMcp, auth_on: str, alice: Persona, bob: Persona, charlie: Persona
) -> dict[str, Any]:
    """A requires_root question from the asker to the mailbox, three forged replies and an
    accepted one, all in the asker's inbox: ``{"question": id, "<kind>": reply id}``."""
    operator = make_project(alice, "default", "operator", restricted=True)
    orchestrator = make_project(alice, "default", "orchestrator", restricted=True)
    make_project(charlie, "default", "elsewhere", restricted=True)
    for project in (operator, orchestrator):
        Grant.objects.create(user=bob.user, project=project, level=Grant.Level.WRITE)
    Grant.objects.create(user=charlie.user, project=orchestrator, level=Grant.Level.WRITE)
    question = {
        "to_workspace": "default",
        "to_project": "operator",
        "from_workspace": "default",
        "from_project": "orchestrator",
        "subject": MERGE_SUBJECT,
        "body": MERGE_BODY.replace("default/project-a", "default/orchestrator"),
    }
    status, sent = api("post", "/api/v1/messages", question, token=auth_on)
    assert status == 201, sent
    question_id = sent["message_id"]
    ids = {"question": question_id}
    for kind, option, sender, token in [
        ("not_root", "merge", "operator", bob.token),
        ("wrong_project", "merge", "elsewhere", charlie.token),
        ("unknown_option", "maybe", "operator", auth_on),
    ]:
        status, sent = api(
            "post", "/api/v1/messages", _reply(question_id, option, sender), token=token
        )
        assert status == 201, sent
        ids[kind] = sent["message_id"]
    # Forged over MCP too: every surface sends through the same rule.
    result = modern.call_tool(
        "memory_message_send",
        _reply(question_id, "merge", "operator"),
        headers={"Authorization": f"Bearer {bob.token}"},
    )
    ids["not_root_mcp"] = result["structuredContent"]["message_id"]
    status, sent = api(
        "post",
        "/api/v1/messages",
        _reply(question_id, "merge", "operator", "Go: CI is green."),
        token=auth_on,
    )
    assert status == 201, sent
    ids["accepted"] = sent["message_id"]
    return ids


def expected_replies(ids: dict[str, Any]) -> dict[str, dict[str, Any]]:
    question_id = ids["question"]
    wrong_project = (
        f"question_id {question_id} names no decision question that default/orchestrator "
        "sent to default/elsewhere, so this reply answers nothing that was asked."
    )
    unknown_option = "option 'maybe' is not one the question offers (it offers: merge, wait)."
    verdicts = {
        "not_root": ("merge", "", False, ROOT_REFUSAL),
        "not_root_mcp": ("merge", "", False, ROOT_REFUSAL),
        "wrong_project": ("merge", "", False, wrong_project),
        "unknown_option": ("maybe", "", False, unknown_option),
        "accepted": ("merge", "Go: CI is green.", True, None),
    }
    return {
        ids[kind]: {
            "question_id": question_id,
            "option": option,
            "comment": comment,
            "accepted": accepted,
            "refusal": refusal,
            "via": "message",
        }
        for kind, (option, comment, accepted, refusal) in verdicts.items()
    }


ORCHESTRATOR = {"workspace": "default", "project": "orchestrator"}


def test_the_server_decides_at_send_which_replies_are_accepted_as_rest_lists_them(
    api: ApiCall, answered: dict[str, Any], auth_on: str
) -> None:
    status, listed = api("get", "/api/v1/messages", ORCHESTRATOR, token=auth_on)
    assert status == 200, listed
    rows = {row["id"]: row["decision_reply"] for row in listed["messages"]}
    assert rows == expected_replies(answered)
    assert [list(reply) for reply in rows.values()] == [
        ["question_id", "option", "comment", "accepted", "refusal", "via"]
    ] * len(rows)


def test_rest_status_and_pop_show_the_verdict(
    api: ApiCall, answered: dict[str, Any], auth_on: str
) -> None:
    expected = expected_replies(answered)
    for reply_id, reply in expected.items():
        status, shown = api("get", f"/api/v1/messages/{reply_id}", ORCHESTRATOR, token=auth_on)
        assert status == 200, shown
        assert shown["decision_reply"] == reply
    for reply_id, reply in expected.items():
        popped = api(
            "post",
            "/api/v1/messages/pop",
            {**ORCHESTRATOR, "message_id": reply_id},
            token=auth_on,
        )[1]["message"]
        assert popped["decision_reply"] == reply


def test_mcp_list_status_and_pop_show_the_verdict(
    modern: RawMcp, answered: dict[str, Any], auth_on: str
) -> None:
    expected = expected_replies(answered)
    bearer = {"Authorization": f"Bearer {auth_on}"}
    listed = modern.call_tool("memory_message_list", ORCHESTRATOR, headers=bearer)
    rows = listed["structuredContent"]["messages"]
    assert {row["id"]: row["decision_reply"] for row in rows} == expected
    for reply_id, reply in expected.items():
        arguments = {**ORCHESTRATOR, "message_id": reply_id}
        shown = modern.call_tool("memory_message_status", arguments, headers=bearer)
        assert shown["structuredContent"]["decision_reply"] == reply
        popped = modern.call_tool("memory_message_pop", arguments, headers=bearer)
        assert popped["structuredContent"]["message"]["decision_reply"] == reply


def test_the_user_named_root_answers_a_requires_root_question_by_token(
    api: ApiCall, settings: SettingsWrapper, answered: dict[str, Any], auth_on: str, bob: Persona
) -> None:
    settings.AI_MEMORY_ROOT_USERNAME = "bob"
    reply = _reply(answered["question"], "wait", "operator")
    status, sent = api("post", "/api/v1/messages", reply, token=bob.token)
    assert status == 201, sent
    shown = api("get", f"/api/v1/messages/{sent['message_id']}", ORCHESTRATOR, token=auth_on)[1]
    assert (shown["decision_reply"]["accepted"], shown["decision_reply"]["refusal"]) == (True, None)


def test_on_an_anonymous_server_every_sender_counts_as_root(
    api: ApiCall, project_a: Project, project_b: Project
) -> None:
    question = {**SEND, "subject": MERGE_SUBJECT, "body": MERGE_BODY}
    question_id = api("post", "/api/v1/messages", question)[1]["message_id"]
    reply = {
        **SEND,
        "to_project": "project-a",
        "from_project": "project-b",
        "subject": decision_reply_subject(question_id),
        "body": decision_reply_write(question_id, "merge"),
    }
    assert api("post", "/api/v1/messages", reply)[0] == 201
    [row] = api("get", "/api/v1/messages", A)[1]["messages"]
    assert row["decision_reply"]["accepted"] is True


def test_a_reply_naming_no_uuid_or_an_ordinary_message_is_not_accepted(
    api: ApiCall, project_a: Project, project_b: Project
) -> None:
    ordinary_id = api("post", "/api/v1/messages", SEND)[1]["message_id"]
    for question_id in ("not-a-uuid", ordinary_id):
        reply = {
            **SEND,
            "to_project": "project-a",
            "from_project": "project-b",
            "subject": decision_reply_subject(question_id),
            "body": decision_reply_write(question_id, "merge"),
        }
        assert api("post", "/api/v1/messages", reply)[0] == 201
    rows = api("get", "/api/v1/messages", A)[1]["messages"]
    assert [row["decision_reply"]["accepted"] for row in rows] == [False, False]
    assert rows[0]["decision_reply"]["refusal"].startswith(
        "question_id not-a-uuid names no decision question that default/project-a sent to "
        "default/project-b"
    )


def test_a_reply_stored_before_replies_were_judged_is_not_accepted(
    api: ApiCall, project_a: Project, project_b: Project
) -> None:
    question_id = api(
        "post", "/api/v1/messages", {**SEND, "subject": MERGE_SUBJECT, "body": MERGE_BODY}
    )[1]["message_id"]
    reply = {
        **SEND,
        "to_project": "project-a",
        "from_project": "project-b",
        "subject": decision_reply_subject(question_id),
        "body": decision_reply_write(question_id, "merge"),
    }
    reply_id = api("post", "/api/v1/messages", reply)[1]["message_id"]
    # As a server before this rule stored it: what the body says, and no verdict.
    Message.objects.filter(pk=reply_id).update(
        decision_reply={"question_id": question_id, "option": "merge", "comment": ""}
    )

    [row] = api("get", "/api/v1/messages", A)[1]["messages"]

    assert row["decision_reply"] == {
        "question_id": question_id,
        "option": "merge",
        "comment": "",
        "accepted": False,
        "refusal": "this reply was sent before the server checked who may answer, so it is "
        "not taken.",
        "via": "message",
    }
