"""A message names a project only to a caller who may read it (docs/operating.md#projects-and-grants).

alice's restricted ``acme/secretproj`` and the open ``acme/openproj`` write to each other;
bob holds a read grant on secretproj, charlie nothing. Whatever charlie reads of that
mail, through REST or MCP, leaves secretproj out (its names and ids are null), as a
project that does not exist would be, and as the web's mailbox shows "a project you
cannot read"; bob and alice see it named.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from messaging.services import message_send
from projects.models import Grant
from tests.conftest import Persona, make_project
from tests.mcp_raw import RawMcp

pytestmark = pytest.mark.django_db

OPEN = {"workspace": "acme", "project": "openproj"}
FROM_FIELDS = ("from_workspace", "from_project", "from_workspace_id", "from_project_id")
TO_FIELDS = ("to_workspace", "to_project", "to_workspace_id", "to_project_id")


@pytest.fixture
def world(alice: Persona, bob: Persona, charlie: Persona) -> dict[str, str]:
    """secretproj wrote to openproj and openproj to secretproj; the two message ids."""
    secret = make_project(alice, "acme", "secretproj", restricted=True)
    make_project(alice, "acme", "openproj")
    Grant.objects.create(user=bob.user, project=secret, level=Grant.Level.READ)
    inbound = _send(alice, "secretproj", "openproj", "hello from secretproj")
    outbound = _send(alice, "openproj", "secretproj", "hello to secretproj")
    return {"inbound": inbound, "outbound": outbound}


def _send(who: Persona, sender: str, recipient: str, body: str) -> str:
    sent = message_send(
        principal=who.principal,
        to_workspace="acme",
        to_project=recipient,
        from_workspace="acme",
        from_project=sender,
        subject="deploy",
        body=body,
    )
    return str(sent.message.id)


def _get(client: Client, who: Persona, path: str, query: dict[str, Any]) -> Any:
    response = client.get(path, query, headers={"Authorization": f"Bearer {who.token}"})
    assert response.status_code == 200, response.content
    return response.json()


def _post(client: Client, who: Persona, path: str, body: dict[str, Any]) -> Any:
    response = client.post(
        path,
        json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {who.token}"},
    )
    assert response.status_code == 200, response.content
    return response.json()


def _hidden(message: dict[str, Any], fields: tuple[str, ...]) -> bool:
    return all(message[field] is None for field in fields)


def _named_secret(message: dict[str, Any], side: str) -> bool:
    return (message[f"{side}_workspace"], message[f"{side}_project"]) == ("acme", "secretproj")


def test_rest_list_hides_a_sender_charlie_may_not_read(
    client: Client, world: dict[str, str], charlie: Persona
) -> None:
    [message] = _get(client, charlie, "/api/v1/messages", OPEN)["messages"]

    assert _hidden(message, FROM_FIELDS)
    assert (message["to_workspace"], message["to_project"]) == ("acme", "openproj")
    assert message["body"] == "hello from secretproj"
    assert "secretproj" not in json.dumps({k: v for k, v in message.items() if k != "body"})


def test_rest_pop_hides_a_sender_charlie_may_not_read(
    client: Client, world: dict[str, str], charlie: Persona
) -> None:
    popped = _post(client, charlie, "/api/v1/messages/pop", OPEN)

    assert popped["message"]["id"] == world["inbound"]
    assert _hidden(popped["message"], FROM_FIELDS)
    assert popped["message"]["to_project"] == "openproj"


@pytest.mark.parametrize("reader", ["alice", "bob"])
def test_a_reader_of_the_sender_sees_it_named(
    request: pytest.FixtureRequest, client: Client, world: dict[str, str], reader: str
) -> None:
    who: Persona = request.getfixturevalue(reader)

    [listed] = _get(client, who, "/api/v1/messages", OPEN)["messages"]
    popped = _post(client, who, "/api/v1/messages/pop", OPEN)["message"]

    assert _named_secret(listed, "from")
    assert _named_secret(popped, "from")
    assert listed["from_project_id"] == popped["from_project_id"] is not None


def test_mcp_list_and_pop_hide_the_sender_too(
    handshake: RawMcp, world: dict[str, str], charlie: Persona
) -> None:
    headers = {"Authorization": f"Bearer {charlie.token}"}

    listed = handshake.call_tool("memory_message_list", OPEN, headers=headers)
    popped = handshake.call_tool("memory_message_pop", OPEN, headers=headers)

    [message] = listed["structuredContent"]["messages"]
    assert _hidden(message, FROM_FIELDS)
    assert _hidden(popped["structuredContent"]["message"], FROM_FIELDS)
    assert "secretproj" not in json.dumps([listed, popped]).replace("from secretproj", "")


def test_the_outbox_hides_a_recipient_charlie_may_not_read(
    client: Client, world: dict[str, str], charlie: Persona
) -> None:
    [message] = _get(client, charlie, "/api/v1/messages", {**OPEN, "box": "outbox"})["messages"]

    assert _hidden(message, TO_FIELDS)
    assert (message["from_workspace"], message["from_project"]) == ("acme", "openproj")


def test_status_search_and_thread_hide_it_as_well(
    client: Client, world: dict[str, str], charlie: Persona
) -> None:
    inbound, outbound = world["inbound"], world["outbound"]

    status_in = _get(client, charlie, f"/api/v1/messages/{inbound}", OPEN)
    status_out = _get(client, charlie, f"/api/v1/messages/{outbound}", OPEN)
    hits = _get(client, charlie, "/api/v1/messages/search", {**OPEN, "q": "hello", "box": "all"})
    thread = _get(client, charlie, f"/api/v1/messages/{inbound}/thread", OPEN)

    assert _hidden(status_in, FROM_FIELDS)
    assert _hidden(status_out, TO_FIELDS)
    assert len(hits["messages"]) == 2
    for hit in hits["messages"]:
        assert _hidden(hit, FROM_FIELDS) or _hidden(hit, TO_FIELDS)
    [head] = thread["messages"]
    assert _hidden(head, FROM_FIELDS)


def test_the_hidden_form_is_the_shown_one_with_nulls(
    client: Client, world: dict[str, str], bob: Persona, charlie: Persona
) -> None:
    """Same keys in the same order; only the sender's four fields differ."""
    [shown] = _get(client, bob, "/api/v1/messages", OPEN)["messages"]
    [hidden] = _get(client, charlie, "/api/v1/messages", OPEN)["messages"]

    assert list(hidden) == list(shown)
    assert {key for key in shown if shown[key] != hidden[key]} == set(FROM_FIELDS)


def test_hiding_senders_costs_no_query_on_the_list(
    client: Client, world: dict[str, str], alice: Persona, charlie: Persona
) -> None:
    """The list decides every sender's access with the rows it reads anyway: charlie's
    list of mail from four restricted projects costs what his list of mail from four open
    ones does."""
    make_project(charlie, "acme", "mine")
    for n in range(3):
        make_project(alice, "acme", f"hush-{n}", restricted=True)
        _send(alice, f"hush-{n}", "openproj", f"hush {n}")
    for n in range(4):
        make_project(alice, "acme", f"pub-{n}")
        _send(alice, f"pub-{n}", "mine", f"pub {n}")
    headers = {"Authorization": f"Bearer {charlie.token}"}
    # A first call records the token's use, a write the measured calls then skip.
    client.get("/api/v1/messages", {"workspace": "acme", "project": "mine"}, headers=headers)

    counts = []
    for project in ("openproj", "mine"):
        with CaptureQueriesContext(connection) as captured:
            listed = _get(
                client, charlie, "/api/v1/messages", {"workspace": "acme", "project": project}
            )
        assert len(listed["messages"]) == 4
        assert all(_hidden(m, FROM_FIELDS) == (project == "openproj") for m in listed["messages"])
        counts.append(len(captured.captured_queries))

    assert counts[0] == counts[1]


def test_a_pop_of_mail_from_an_open_sender_costs_no_query_to_name_it(
    client: Client, world: dict[str, str], alice: Persona, charlie: Persona
) -> None:
    """The claim brings the sender's access mode and creator: charlie's pop of mail from
    an open project decides he may see it named with no query of its own; only a
    restricted sender (secretproj) costs the grant's look-up."""
    make_project(charlie, "acme", "mine")
    make_project(alice, "acme", "pub")
    mine = {"workspace": "acme", "project": "mine"}
    for _ in range(2):
        _send(alice, "pub", "mine", "from an open project")
    _send(alice, "secretproj", "mine", "from a restricted one")
    _post(client, charlie, "/api/v1/messages/pop", mine)  # records the token's use first

    counts = []
    for _ in range(2):
        with CaptureQueriesContext(connection) as captured:
            popped = _post(client, charlie, "/api/v1/messages/pop", mine)["message"]
        counts.append((len(captured.captured_queries), _hidden(popped, FROM_FIELDS)))

    assert counts[1] == (counts[0][0] + 1, True)
    assert counts[0][1] is False
