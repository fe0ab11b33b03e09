"""The project page's search and a message's page, ``/web/w/<ws>/<proj>/messages/<id>/``
(docs/operating.md#the-web-mailbox): read-only, escaped, and as blind to a project the
viewer may not read as to one that does not exist.

On an anonymous server default/project-a sends to default/project-b; with authentication
on, alice owns the restricted default/alpha, bob reads it and charlie has nothing.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from urllib.parse import urlencode

import pytest
from django.db import connection
from django.http import HttpResponse
from django.template.loader import render_to_string
from django.test import Client, RequestFactory
from django.utils import timezone

from aimemory_site.lib.decisions import decision_body_write
from aimemory_site.lib.principal import Principal
from messaging.answer_services import decision_answer
from messaging.models import Message
from messaging.services import message_cancel, message_pop
from projects.models import Grant, Project
from tests.conftest import Persona, make_project
from tests.decision_examples import answer_taken, question_send
from tests.webui.conftest import deliver, element, page, section, text_of
from webui.selectors import (
    MessageLink,
    ProjectName,
    SearchResults,
    SearchRow,
    SnippetPart,
)

NumQueries = Callable[[int], AbstractContextManager[object]]

B_PAGE = "/web/w/default/project-b/"
NOT_FOUND = "There is no page at this address."
XSS = "<script>alert(1)</script>"
ESCAPED_XSS = "&lt;script&gt;alert(1)&lt;/script&gt;"

# A project page with a search: the page's queries (tests/webui/test_query_counts.py),
# then the search's: its access check, the ranked hits with their snippets, and the hits'
# messages with both projects. The hits' other sides join the page's one query for
# readable projects.
SEARCH_QUERIES_ANONYMOUS = 10
# A signed-in user with the root token set (``auth_on``): the session and the user come
# first, and no query asks whether authentication is on.
SEARCH_QUERIES_USER = 11
# A message page: is auth on; status's access and lookup; the thread's access, lookup,
# chain and messages; which of their projects the viewer may read.
MESSAGE_QUERIES_ANONYMOUS = 8
MESSAGE_QUERIES_USER = 9  # with ``auth_on``, as above


def message_url(message: Message, project: str = "default/project-b") -> str:
    return f"/web/w/{project}/messages/{message.pk}/"


def search(client: Client, query: str, path: str = B_PAGE) -> str:
    """The search section of ``path?q=query``."""
    html = page(client, f"{path}?{urlencode({'q': query})}")
    return section(html, "search-heading")


def hits(markup: str) -> list[str]:
    """Each hit's markup, in order."""
    return re.findall(r'<li class="hit">(.*?)</li>', markup, re.S)


@pytest.fixture
def projects(db: None) -> list[Project]:
    """default/project-a, default/project-b and default/project-c on an anonymous server."""
    return [make_project(None, "default", name) for name in ("project-a", "project-b", "project-c")]


@pytest.fixture
def alpha(auth_on: str, alices_restricted: Project, alices_open: Project) -> Project:
    """alice's restricted default/alpha, holding a request from her open default/commons."""
    deliver("default/alpha", "default/commons", "deploy the vault keys", subject="vault deploy")
    return alices_restricted


# The search box --------------------------------------------------------------------------


def test_the_project_page_has_a_search_box_and_no_results_without_a_query(
    client: Client, projects: list[Project]
) -> None:
    html = page(client, B_PAGE)
    assert re.search(
        r'<form class="search" method="get" action="/web/w/default/project-b/" role="search"',
        html,
    )
    assert 'name="q"' in html and 'value=""' in html
    assert 'id="search-heading"' not in html
    # A blank query is no query.
    assert 'id="search-heading"' not in page(client, f"{B_PAGE}?q=+++")


def test_a_search_shows_hits_of_the_inbox_and_the_outbox_with_snippets(
    client: Client, projects: list[Project]
) -> None:
    received = deliver(
        "default/project-b",
        "default/project-a",
        "We are deploying the export endpoint to staging tonight.",
        subject="export rollout",
    )
    sent = deliver(
        "default/project-c",
        "default/project-b",
        "Please deploy the docs site after the export lands.",
        subject="docs deploy",
    )
    deliver("default/project-c", "default/project-a", "deploy elsewhere", subject="not b's")
    deliver("default/project-b", "default/project-a", "nothing to see", subject="unrelated")

    found = search(client, "deploy")
    assert text_of(element(found, "search-count")) == "2 hits for “deploy”"
    rows = hits(found)
    assert len(rows) == 2
    by_subject = {text_of(row.split("</h3>")[0]): row for row in rows}
    assert set(by_subject) == {"export rollout", "docs deploy"}
    inbound, outbound = by_subject["export rollout"], by_subject["docs deploy"]
    assert f'href="{message_url(received)}"' in inbound
    assert "inbox · from default/project-a" in text_of(inbound)
    assert f'href="{message_url(sent)}"' in outbound
    assert "outbox · to default/project-c" in text_of(outbound)
    # Stemmed: "deploying" matched, and it is the highlighted word.
    assert "<mark>deploying</mark>" in inbound
    assert "We are deploying the export endpoint to staging tonight." in text_of(inbound)
    assert "not b&#x27;s" not in found and "unrelated" not in found


def test_a_search_finds_every_stored_state_and_says_which(
    client: Client, projects: list[Project]
) -> None:
    claimed = deliver("default/project-b", "default/project-a", "rotate the token", subject="one")
    cancelled = deliver("default/project-c", "default/project-b", "rotate the cert", subject="two")
    message_pop(
        principal=Principal.anonymous(),
        workspace="default",
        project="project-b",
        message_id=str(claimed.pk),
    )
    message_cancel(
        principal=Principal.anonymous(),
        workspace="default",
        project="project-b",
        message_id=str(cancelled.pk),
    )
    text = text_of(search(client, "rotate"))
    assert "from default/project-a · claimed" in text
    assert "to default/project-c · cancelled" in text


def test_a_search_never_changes_a_message(client: Client, projects: list[Project]) -> None:
    sent = deliver("default/project-b", "default/project-a", "keep me pending", subject="keep")
    for _ in range(2):
        assert len(hits(search(client, "pending"))) == 1
    assert Message.objects.get(pk=sent.pk).state == Message.State.PENDING
    popped = message_pop(principal=Principal.anonymous(), workspace="default", project="project-b")
    assert popped is not None and popped.pk == sent.pk


def test_subject_body_and_snippet_are_escaped(client: Client, projects: list[Project]) -> None:
    deliver(
        "default/project-b",
        "default/project-a",
        f"release {XSS} <b>bold</b> <mark>fake</mark> & more",
        subject=f"release {XSS}",
    )
    html = page(client, f"{B_PAGE}?q=release")
    found = section(html, "search-heading")
    assert "<script>alert" not in html
    assert "<b>bold</b>" not in html and "<mark>fake</mark>" not in html
    assert f"release {ESCAPED_XSS}" in found  # the subject
    snippet = re.search(r'<p class="hit__snippet">(.*?)</p>', found, re.S)
    assert snippet is not None
    assert snippet.group(1).startswith("<mark>release</mark> ")
    assert "<" not in re.sub(r"</?mark>", "", snippet.group(1))
    if connection.vendor == "sqlite":  # PostgreSQL's ts_headline leaves tags out
        assert snippet.group(1) == (
            f"<mark>release</mark> {ESCAPED_XSS} &lt;b&gt;bold&lt;/b&gt; "
            "&lt;mark&gt;fake&lt;/mark&gt; &amp; more"
        )
    # The query shown back is escaped too.
    echoed = page(client, f"{B_PAGE}?{urlencode({'q': XSS})}")
    assert "<script>alert" not in echoed
    assert f'value="{ESCAPED_XSS}"' in echoed


def test_a_snippet_is_escaped_before_its_match_is_marked(rf: RequestFactory) -> None:
    results = SearchResults(
        query="x",
        rows=[
            SearchRow(
                link=MessageLink(
                    id=uuid.UUID("0190b6a4-0000-7000-8000-000000000001"),
                    url="/web/w/default/project-b/messages/0190b6a4-0000-7000-8000-000000000001/",
                    subject=XSS,
                    direction="from",
                    counterpart=None,
                    state="pending",
                    created_at=timezone.now(),
                ),
                snippet=[
                    SnippetPart(text="a ", match=False),
                    SnippetPart(text=XSS, match=True),
                    SnippetPart(text=" b <i>c</i>", match=False),
                ],
            )
        ],
    )
    html = render_to_string(
        "webui/_search.html",
        {"search": results, "name": ProjectName("default", "project-b")},
        rf.get("/"),
    )
    assert f"<mark>{ESCAPED_XSS}</mark> b &lt;i&gt;c&lt;/i&gt;" in html
    assert "<script>" not in html and "<i>" not in html


def test_a_body_bracket_is_text_and_only_the_match_is_marked(
    client: Client, projects: list[Project]
) -> None:
    deliver(
        "default/project-b",
        "default/project-a",
        "The key [REDACTED] was rotated for the invoice service.",
        subject="keys",
    )
    found = search(client, "invoice")
    assert "<mark>invoice</mark>" in found
    assert "[REDACTED]" in found
    assert "<mark>REDACTED</mark>" not in found


def test_an_over_long_query_shows_the_error_on_the_page(
    client: Client, projects: list[Project]
) -> None:
    deliver("default/project-b", "default/project-a", "x marks the spot", subject="x")
    response = client.get(B_PAGE, {"q": "x" * 501})
    assert response.status_code == 200
    assert isinstance(response, HttpResponse)
    found = section(response.content.decode(), "search-heading")
    assert text_of(element(found, "search-error")) == (
        "query must be at most 500 characters, got 501"
    )
    assert hits(found) == []
    # 500 is allowed.
    assert 'id="search-error"' not in search(client, "x" * 500)


def test_a_query_of_only_stop_words_finds_nothing_without_error(
    client: Client, projects: list[Project]
) -> None:
    deliver("default/project-b", "default/project-a", "the and of it", subject="stop")
    found = search(client, "the of")
    assert 'id="search-error"' not in found
    assert text_of(element(found, "search-empty")) == (
        "No message in this project's inbox or outbox matches."
    )


def test_twenty_hits_at_most(client: Client, projects: list[Project]) -> None:
    for n in range(22):
        deliver("default/project-b", "default/project-a", f"batch item {n}", subject=f"batch {n}")
    found = search(client, "batch")
    assert len(hits(found)) == 20
    assert text_of(element(found, "search-count")) == "the best 20 hits for “batch”"


def test_charlie_searches_a_project_he_cannot_read_as_one_that_does_not_exist(
    client: Client, alpha: Project, charlie: Persona
) -> None:
    client.force_login(charlie.user)
    unreadable = search(client, "vault", "/web/w/default/alpha/")
    missing = search(client, "vault", "/web/w/default/no-such/")
    assert unreadable == missing
    assert hits(unreadable) == []
    assert "vault deploy" not in page(client, "/web/w/default/alpha/?q=vault")
    # And an over-long query is refused alike.
    long_query = "v" * 501
    assert search(client, long_query, "/web/w/default/alpha/") == search(
        client, long_query, "/web/w/default/no-such/"
    )


def test_bob_who_reads_the_project_finds_its_mail(
    client: Client, alpha: Project, bob: Persona
) -> None:
    client.force_login(bob.user)
    assert "vault deploy" in text_of(search(client, "vault", "/web/w/default/alpha/"))


def test_a_project_page_with_a_search_runs_a_fixed_number_of_queries(
    client: Client,
    projects: list[Project],
    django_assert_num_queries: NumQueries,
) -> None:
    for n in range(8):
        deliver("default/project-b", "default/project-a", f"report {n}", subject=f"report {n}")
        deliver("default/project-c", "default/project-b", f"report out {n}", subject=f"out {n}")
    with django_assert_num_queries(SEARCH_QUERIES_ANONYMOUS):
        found = search(client, "report")
    assert len(hits(found)) == 16


def test_a_project_page_with_a_search_for_a_user_runs_a_fixed_number_of_queries(
    client: Client, alpha: Project, bob: Persona, django_assert_num_queries: NumQueries
) -> None:
    for n in range(5):
        deliver("default/alpha", "default/commons", f"vault item {n}", subject=f"vault {n}")
    client.force_login(bob.user)
    with django_assert_num_queries(SEARCH_QUERIES_USER):
        found = search(client, "vault", "/web/w/default/alpha/")
    assert len(hits(found)) == 6


def test_a_bodys_own_brackets_are_never_shown_as_a_match(
    client: Client, projects: list[Project]
) -> None:
    # A body's "[REDACTED]" (the scrubber's) sits beside the match in the snippet.
    deliver(
        "default/project-b", "default/project-a", "Deploying now, the key [REDACTED] as agreed."
    )

    found = search(client, "deploy")

    assert "<mark>Deploying</mark>" in found
    assert "[REDACTED]" in found
    assert "<mark>REDACTED</mark>" not in found


# The message page --------------------------------------------------------------------------


def test_the_message_page_shows_the_message_and_its_fenced_escaped_body(
    client: Client, projects: list[Project]
) -> None:
    message = deliver(
        "default/project-b",
        "default/project-a",
        f"Line one\n  indented {XSS}\n<img src=x onerror=alert(2)>",
        subject=f"Export {XSS}",
    )
    html = page(client, message_url(message))
    assert "<script>alert" not in html and "<img src=x" not in html
    assert f"<title>Export {ESCAPED_XSS} · default/project-b · ai-memory</title>" in html
    assert text_of(element(html, "message-subject")) == f"Export {XSS}"
    meta = text_of(element(html, "message-meta"))
    assert meta.startswith("pending in the inbox of default/project-b sent")
    facts = text_of(element(html, "message-facts"))
    assert "From default/project-a" in facts
    assert "To default/project-b" in facts
    assert "State pending" in facts
    assert re.search(r"Sent \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", facts)
    assert f"Id {message.pk}" in facts
    body = element(html, "message-body")
    assert body == (
        '<pre class="message-body" id="message-body">'
        f"Line one\n  indented {ESCAPED_XSS}\n&lt;img src=x onerror=alert(2)&gt;</pre>"
    )
    assert "untrusted input" in text_of(element(html, "message-notice"))
    assert "nothing on this page pops, cancels or answers" in text_of(
        element(html, "message-read-only")
    )


def test_the_message_page_shows_claims_cancels_and_an_outbox_message(
    client: Client, projects: list[Project]
) -> None:
    sent = deliver("default/project-c", "default/project-b", "please look", subject="to c")
    message_pop(principal=Principal.anonymous(), workspace="default", project="project-c")
    html = page(client, message_url(sent))
    assert text_of(element(html, "message-meta")).startswith("claimed in the outbox of")
    facts = text_of(element(html, "message-facts"))
    assert "To default/project-c" in facts and "Claimed " in facts
    withdrawn = deliver("default/project-c", "default/project-b", "never mind", subject="oops")
    message_cancel(
        principal=Principal.anonymous(),
        workspace="default",
        project="project-b",
        message_id=str(withdrawn.pk),
    )
    facts = text_of(element(page(client, message_url(withdrawn)), "message-facts"))
    assert "State cancelled" in facts and "Cancelled " in facts


def test_the_thread_links_each_message_of_the_project_oldest_first(
    client: Client, projects: list[Project]
) -> None:
    ask = deliver("default/project-b", "default/project-a", "can you export?", subject="ask")
    forward = deliver(
        "default/project-c", "default/project-b", "c, can you?", subject="fwd", in_reply_to=ask
    )
    aside = deliver(
        "default/project-a", "default/project-c", "c to a", subject="aside", in_reply_to=forward
    )
    answer = deliver(
        "default/project-a", "default/project-b", "done", subject="answer", in_reply_to=forward
    )
    html = page(client, message_url(forward))
    thread = element(html, "thread")
    entries = re.findall(r'<li class="thread__entry[^"]*">(.*?)</li>', thread, re.S)
    assert [text_of(entry).split(" ")[0] for entry in entries] == ["ask", "fwd", "answer"]
    assert f'href="{message_url(ask)}"' in entries[0]
    assert 'aria-current="page"' in entries[1] and "href" not in entries[1]
    assert f'href="{message_url(answer)}"' in entries[2]
    assert "from default/project-a" in text_of(entries[0])
    assert "to default/project-c" in text_of(entries[1])
    # Project-b's page never shows the message between a and c, nor links it.
    assert str(aside.pk) not in html and "aside" not in text_of(thread)
    # The message it answers is in the thread: its id links there.
    assert f'<a href="{message_url(ask)}"><code>{ask.pk}</code></a>' in html


def test_a_reply_to_a_message_the_project_cannot_see_names_its_id_without_a_link(
    client: Client, projects: list[Project]
) -> None:
    elsewhere = deliver("default/project-c", "default/project-a", "between a and c", subject="ac")
    reply = deliver(
        "default/project-b", "default/project-a", "fyi", subject="fyi", in_reply_to=elsewhere
    )
    html = page(client, message_url(reply))
    assert f"In reply to {elsewhere.pk}" in text_of(element(html, "message-facts"))
    assert f'href="{message_url(elsewhere)}"' not in html
    assert text_of(element(html, "thread-count")) == "1 message"


@pytest.mark.parametrize("method", ["post", "put", "delete"])
def test_the_message_page_takes_get_only_and_never_changes_the_message(
    projects: list[Project], method: str
) -> None:
    client = Client(enforce_csrf_checks=True)
    message = deliver("default/project-b", "default/project-a", "stay", subject="stay")
    assert getattr(client, method)(message_url(message)).status_code == 405
    html = page(client, message_url(message))
    assert "<form" not in html and "<button" not in html
    assert Message.objects.get(pk=message.pk).state == Message.State.PENDING
    popped = message_pop(principal=Principal.anonymous(), workspace="default", project="project-b")
    assert popped is not None and popped.pk == message.pk


def _not_found(client: Client, path: str) -> str:
    response = client.get(path)
    assert response.status_code == 404
    assert isinstance(response, HttpResponse)
    html = response.content.decode()
    assert NOT_FOUND in html
    return html


def test_a_message_the_project_did_not_send_or_receive_is_the_404_page(
    client: Client, projects: list[Project]
) -> None:
    between = deliver("default/project-c", "default/project-a", "not b's", subject="ac")
    unknown = "0190b6a4-0000-7000-8000-000000000001"
    assert _not_found(client, message_url(between)) == _not_found(
        client, f"/web/w/default/project-b/messages/{unknown}/"
    )
    _not_found(client, "/web/w/default/project-b/messages/not-a-uuid/")
    _not_found(client, f"/web/w/default/no-such/messages/{between.pk}/")


def test_charlie_gets_the_same_404_for_a_project_he_cannot_read_as_for_a_missing_one(
    client: Client, alpha: Project, charlie: Persona
) -> None:
    message = Message.objects.get(to_project=alpha)
    client.force_login(charlie.user)
    unreadable = _not_found(client, message_url(message, "default/alpha"))
    missing = _not_found(client, message_url(message, "default/no-such"))
    unknown = _not_found(
        client, "/web/w/default/alpha/messages/0190b6a4-0000-7000-8000-000000000001/"
    )
    assert unreadable == missing == unknown
    assert "vault" not in unreadable


def test_bob_reads_the_message_and_an_unreadable_sender_stays_unnamed(
    client: Client, alpha: Project, alice: Persona, bob: Persona
) -> None:
    make_project(alice, "default", "alices-notes", restricted=True)
    secret = deliver("default/alpha", "default/alices-notes", "from the notes", subject="notes")
    client.force_login(bob.user)
    html = page(client, message_url(secret, "default/alpha"))
    facts = text_of(element(html, "message-facts"))
    assert "From a project you cannot read" in facts
    assert "alices-notes" not in html


def test_a_visitor_is_sent_to_sign_in(client: Client, alpha: Project) -> None:
    message = Message.objects.get(to_project=alpha)
    response = client.get(message_url(message, "default/alpha"))
    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next={message_url(message, 'default/alpha')}"


def test_a_question_links_to_its_answer_page(client: Client, projects: list[Project]) -> None:
    body = decision_body_write(
        "Ship it?",
        [{"id": "yes", "label": "Yes"}],
        requires_root=False,
        reply_project="default/project-a",
    )
    question = deliver("default/project-b", "default/project-a", body, subject="decision: Ship it?")
    html = page(client, message_url(question))
    assert f'href="/web/w/default/project-b/decisions/{question.pk}/"' in html


def test_the_message_page_for_a_user_runs_a_fixed_number_of_queries(
    client: Client, alpha: Project, bob: Persona, django_assert_num_queries: NumQueries
) -> None:
    first = Message.objects.get(to_project=alpha)
    previous = first
    for n in range(4):
        previous = deliver(
            "default/commons" if n % 2 == 0 else "default/alpha",
            "default/alpha" if n % 2 == 0 else "default/commons",
            f"step {n}",
            subject=f"step {n}",
            in_reply_to=previous,
        )
    client.force_login(bob.user)
    with django_assert_num_queries(MESSAGE_QUERIES_USER):
        html = page(client, message_url(first, "default/alpha"))
    assert text_of(element(html, "thread-count")) == "5 messages"


def test_an_anonymous_message_page_runs_a_fixed_number_of_queries(
    client: Client, projects: list[Project], django_assert_num_queries: NumQueries
) -> None:
    previous = deliver("default/project-b", "default/project-a", "start", subject="start")
    first = previous
    for n in range(4):
        previous = deliver(
            "default/project-a" if n % 2 == 0 else "default/project-b",
            "default/project-b" if n % 2 == 0 else "default/project-a",
            f"step {n}",
            subject=f"step {n}",
            in_reply_to=previous,
        )
    with django_assert_num_queries(MESSAGE_QUERIES_ANONYMOUS):
        html = page(client, message_url(first))
    assert text_of(element(html, "thread-count")) == "5 messages"


# A question that was answered ---------------------------------------------------------------

# The message page's queries, and one more for a question no longer pending: the answer
# the asker took (messaging.answer_selectors.decision_answer_taken).
ANSWERED_QUESTION_QUERIES_USER = MESSAGE_QUERIES_USER + 1


@pytest.fixture
def taken(auth_on: str, alice: Persona, bob: Persona) -> tuple[Message, Message]:
    """alice answered a question in her mailbox default/operator with a comment, and the
    asker default/orchestrator took the answer as ``decision wait`` does: popped the reply
    and cancelled the question. bob reads the mailbox. Returns (question, reply)."""
    operator = make_project(alice, "default", "operator", restricted=True)
    make_project(alice, "default", "orchestrator", restricted=True)
    Grant.objects.create(user=bob.user, project=operator, level=Grant.Level.READ)
    question = question_send()
    reply = decision_answer(
        principal=alice.principal,
        workspace="default",
        project="operator",
        question_id=question.pk,
        option="reject",
        comment=f"Stabilise it first.\n{XSS}",
    ).message
    answer_taken(question, reply)
    return question, reply


def test_an_answered_question_shows_its_answer_and_comment_not_a_cancelled_pill(
    client: Client, taken: tuple[Message, Message], bob: Persona
) -> None:
    question, reply = taken
    client.force_login(bob.user)

    html = page(client, message_url(question, "default/operator"))

    meta = element(html, "message-meta")
    assert text_of(meta).startswith("answered in the inbox of default/operator")
    assert "badge--state" not in meta
    answered = element(html, "message-answered")
    assert text_of(answered).startswith("answered: reject by alice from default/operator")
    # The person's comment, escaped, with its line break kept (CSS).
    assert f"Stabilise it first.\n{ESCAPED_XSS}" in element(html, "message-answer-comment")
    assert XSS not in html
    assert f'href="{message_url(reply, "default/operator")}"' in answered


def test_the_askers_copy_of_an_answered_question_shows_the_answer_too(
    client: Client, taken: tuple[Message, Message], alice: Persona
) -> None:
    question, _ = taken
    client.force_login(alice.user)

    html = page(client, message_url(question, "default/orchestrator"))

    assert text_of(element(html, "message-meta")).startswith("answered in the outbox of")
    assert text_of(element(html, "message-answered")).startswith("answered: reject by alice")


def test_a_question_withdrawn_unanswered_is_still_shown_cancelled(
    client: Client, taken: tuple[Message, Message], alice: Persona
) -> None:
    unanswered = question_send("Rename the export module?")
    message_cancel(
        principal=Principal.root(),
        workspace="default",
        project="orchestrator",
        message_id=str(unanswered.pk),
    )
    client.force_login(alice.user)

    html = page(client, message_url(unanswered, "default/operator"))

    assert '<span class="badge badge--state">cancelled</span>' in element(html, "message-meta")
    assert 'id="message-answered"' not in html


def test_an_answered_question_page_runs_a_fixed_number_of_queries(
    client: Client,
    taken: tuple[Message, Message],
    bob: Persona,
    django_assert_num_queries: NumQueries,
) -> None:
    question, _ = taken
    client.force_login(bob.user)
    with django_assert_num_queries(ANSWERED_QUESTION_QUERIES_USER):
        html = page(client, message_url(question, "default/operator"))
    assert 'id="message-answered"' in html


# Links to the message page ----------------------------------------------------------------


def test_the_mailbox_rows_and_its_live_region_link_to_the_message_page(
    client: Client, projects: list[Project]
) -> None:
    message = deliver("default/project-b", "default/project-a", "hello", subject="hello")
    link = f'<a href="{message_url(message)}">hello</a>'
    assert link in section(page(client, B_PAGE), "mailbox-heading")
    assert link in page(client, f"{B_PAGE}live/")
