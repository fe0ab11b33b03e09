"""/web/w/<workspace>/<project>/: the Mailbox above Recent Activity, read-only."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from aimemory_site.lib.decisions import decision_body_write
from aimemory_site.lib.principal import Principal
from messaging.models import Message
from messaging.services import message_pop
from projects.models import Project
from tests.conftest import Persona, make_project
from tests.webui.conftest import deliver, element, page, section, text_of, without_csrf_token

B_PAGE = "/web/w/default/project-b/"
EMPTY = "No pending messages for this project."
POP_HINT = "An agent in this project reads them with memory_message_pop."


@pytest.fixture
def projects(db: None) -> list[Project]:
    """default/project-a (sender), default/project-b (recipient), default/project-c."""
    return [make_project(None, "default", name) for name in ("project-a", "project-b", "project-c")]


def mailbox_of(client: Client, path: str) -> str:
    return section(page(client, path), "mailbox-heading")


def test_mailbox_lists_pending_messages_oldest_first(
    client: Client, projects: list[Project]
) -> None:
    deliver("default/project-b", "default/project-a", "first body", subject="first")
    deliver("default/project-b", "default/project-c", "second body", subject="second")
    mailbox = mailbox_of(client, B_PAGE)
    assert text_of(mailbox) == (
        "Mailbox 2 pending"
        " first just now from default/project-a first body"
        " second just now from default/project-c second body"
        f" {POP_HINT}"
    )
    assert 'from <a href="/web/w/default/project-a/">default/project-a</a>' in mailbox
    assert "<code>memory_message_pop</code>" in mailbox
    assert "Showing the oldest" not in mailbox


def test_mailbox_sits_above_recent_activity(client: Client, projects: list[Project]) -> None:
    html = page(client, B_PAGE)
    assert html.index('id="mailbox-heading">Mailbox</h2>') < html.index(
        'id="activity-heading">Recent Activity</h2>'
    )
    assert "<title>default/project-b · ai-memory</title>" in html
    assert "<h1" in html and "<main" in html and "<header" in html and "<nav" in html


def test_a_message_without_subject_reads_no_subject(
    client: Client, projects: list[Project]
) -> None:
    deliver("default/project-b", "default/project-a")
    assert "(no subject)" in text_of(mailbox_of(client, B_PAGE))


def test_the_snippet_is_one_line_of_at_most_160_characters(
    client: Client, projects: list[Project]
) -> None:
    body = "line one\n\n\tline   two " + "x" * 200
    deliver("default/project-b", "default/project-a", body, subject="long")
    snippet = element(mailbox_of(client, B_PAGE).replace('class="message__snippet"', 'id="s"'), "s")
    expected = ("line one line two " + "x" * 200)[:160] + "…"
    assert text_of(snippet) == expected


LIVE_SCRIPT = '<script src="/static/webui/live.js" defer></script>'


def test_subject_and_body_are_escaped(client: Client, projects: list[Project]) -> None:
    deliver(
        "default/project-b",
        "default/project-a",
        '<script>alert("body")</script><img src=x onerror=alert(1)>',
        subject='<script>alert("subject")</script>',
    )
    # The page's own script is its only one; its live Mailbox is escaped the same way.
    for html in (page(client, B_PAGE), page(client, f"{B_PAGE}live/")):
        assert html.replace(LIVE_SCRIPT, "").count("<script") == 0
        assert "<img" not in html
        assert "&lt;script&gt;alert(&quot;subject&quot;)&lt;/script&gt;" in html
        assert "&lt;script&gt;alert(&quot;body&quot;)&lt;/script&gt;&lt;img src=x" in html


def test_seven_pending_show_the_oldest_five_of_seven(
    client: Client, projects: list[Project]
) -> None:
    for n in range(1, 8):
        deliver("default/project-b", "default/project-a", f"body {n}", subject=f"request {n}")
    mailbox = mailbox_of(client, B_PAGE)
    text = text_of(mailbox)
    assert text.startswith("Mailbox 5 of 7 pending request 1 ")
    assert [f"request {n}" in text for n in range(1, 8)] == [True] * 5 + [False] * 2
    assert text.endswith(
        "Showing the oldest 5 of 7; ai-memory message list --workspace default"
        " --project project-b --limit 200 lists up to 200."
        f" {POP_HINT}"
    )
    assert (
        "<code>ai-memory message list --workspace default --project project-b --limit 200</code>"
        in mailbox
    )


def test_an_empty_mailbox_says_so(client: Client, projects: list[Project]) -> None:
    mailbox = mailbox_of(client, B_PAGE)
    assert text_of(mailbox) == f"Mailbox {EMPTY}"


def test_only_this_projects_inbox_is_shown(client: Client, projects: list[Project]) -> None:
    deliver("default/project-c", "default/project-a", subject="for c")
    deliver("default/project-a", "default/project-b", subject="sent by b")
    deliver("default/project-b", "default/project-a", subject="for b")
    text = text_of(mailbox_of(client, B_PAGE))
    assert "for b" in text
    assert "for c" not in text
    assert "sent by b" not in text


def test_rendering_never_consumes_a_message(client: Client, projects: list[Project]) -> None:
    sent = deliver("default/project-b", "default/project-a", subject="keep me")
    for _ in range(2):
        assert "keep me" in page(client, B_PAGE)
    assert Message.objects.get(pk=sent.pk).state == Message.State.PENDING
    popped = message_pop(principal=Principal.anonymous(), workspace="default", project="project-b")
    assert popped is not None
    assert popped.pk == sent.pk


def test_the_page_has_no_form_and_no_link_that_changes_messages(
    client: Client, projects: list[Project]
) -> None:
    sent = [deliver("default/project-b", "default/project-a", subject=f"m{n}") for n in range(7)]
    html = page(client, B_PAGE)
    # The one form is the search box: a GET of this same page.
    forms = re.findall(r"<form\b[^>]*>", html)
    assert len(forms) == 1
    assert 'method="get"' in forms[0] and f'action="{B_PAGE}"' in forms[0]
    assert re.findall(r"<button\b[^>]*>", html) == ['<button class="search__button" type="submit">']
    # Each shown message links to its read-only page (docs/operating.md#the-web-mailbox).
    assert set(re.findall(r'<a [^>]*href="([^"]*)"', html)) == {
        "#main",
        "/web/",
        "/web/w/default/project-a/",
        *(f"{B_PAGE}messages/{message.pk}/" for message in sent[:5]),
    }


@pytest.mark.parametrize(
    "path",
    [
        "/web/w/",
        "/web/w/default/",
        "/web/w/default/no-such-project/",
        "/web/w/nowhere/project-b/",
        "/web/w/default/PROJECT-B/",  # names match exactly: no case folding, no alias
    ],
)
def test_a_url_naming_no_existing_project_renders_an_empty_mailbox(
    client: Client, projects: list[Project], path: str
) -> None:
    deliver("default/project-b", "default/project-a", subject="only for project-b")
    html = page(client, path)
    assert text_of(section(html, "mailbox-heading")) == f"Mailbox {EMPTY}"
    assert text_of(section(html, "activity-heading")) == "Recent Activity No recent activity."
    assert "only for project-b" not in html


def test_recent_activity_lists_entries_but_never_a_body(
    client: Client, projects: list[Project]
) -> None:
    deliver("default/project-b", "default/project-a", "the secret body", subject="s")
    message_pop(principal=Principal.anonymous(), workspace="default", project="project-b")
    html = page(client, B_PAGE)
    activity = section(html, "activity-heading")
    assert text_of(activity) == (
        "Recent Activity"
        " message claimed from default/project-a anonymous (other) · just now"
        " message received from default/project-a root (other) · just now"
        " project created project default/project-b created anonymous · just now"
    )
    assert '<a href="/web/w/default/project-a/">default/project-a</a>' in activity
    assert "the secret body" not in html
    assert "message sent to default/project-b" in text_of(page(client, "/web/w/default/project-a/"))


def test_a_sender_the_viewer_cannot_read_is_not_named(
    client: Client, alice: Persona, bob: Persona, alices_restricted: Project
) -> None:
    make_project(alice, "default", "hidden-lab", restricted=True)
    deliver("default/alpha", "default/hidden-lab", "from the lab", subject="lab request")

    client.force_login(bob.user)
    html = page(client, "/web/w/default/alpha/")
    mailbox = section(html, "mailbox-heading")
    assert "lab request" in mailbox
    assert "from a project you cannot read" in text_of(mailbox)
    assert "message received from a project you cannot read" in text_of(
        section(html, "activity-heading")
    )
    assert "hidden-lab" not in html

    client.force_login(alice.user)
    mailbox = mailbox_of(client, "/web/w/default/alpha/")
    assert 'from <a href="/web/w/default/hidden-lab/">default/hidden-lab</a>' in mailbox


def test_an_unreadable_project_page_is_identical_to_a_missing_one(
    client: Client, charlie: Persona, alices_restricted: Project
) -> None:
    make_project(None, "default", "sender")
    deliver("default/alpha", "default/sender", "restricted body", subject="restricted mail")
    client.force_login(charlie.user)
    unreadable = page(client, "/web/w/default/alpha/")
    Project.objects.filter(pk=alices_restricted.pk).delete()
    missing = page(client, "/web/w/default/alpha/")
    assert without_csrf_token(unreadable) == without_csrf_token(missing)
    assert "restricted mail" not in unreadable
    assert EMPTY in unreadable


def test_a_pending_decision_shows_its_question_options_and_root_mark(
    client: Client, project_a: Project, project_b: Project
) -> None:
    body = decision_body_write(
        "Merge the release branch?",
        [
            {"id": "merge", "label": "Merge now", "recommended": True},
            {"id": "wait", "label": "Wait for <b>QA</b>"},
        ],
        requires_root=True,
        reply_project="default/project-a",
    )
    sent = deliver(
        "default/project-b", "default/project-a", body, subject="decision: Merge the release?"
    )

    page = client.get("/web/w/default/project-b/").content.decode()

    assert (
        '<h3 class="message__subject decision__question">'
        f'<a href="/web/w/default/project-b/messages/{sent.pk}/">Merge the release branch?</a> '
        '<span class="badge badge--root">requires root</span></h3>'
    ) in page
    assert (
        '<code>merge</code> Merge now <span class="decision__recommended">(recommended)</span>'
        in page
    )
    assert "Wait for &lt;b&gt;QA&lt;/b&gt;" in page


def test_a_pending_decision_shows_its_question_once(
    client: Client, project_a: Project, project_b: Project
) -> None:
    body = decision_body_write(
        "Merge the release branch now that CI is green?",
        [{"id": "merge", "label": "Merge now", "recommended": True}, {"id": "wait"}],
        requires_root=False,
        reply_project="default/project-a",
        details="QA signed off yesterday.\nThe changelog is written.",
    )
    deliver("default/project-b", "default/project-a", body, subject="decision: Merge the release?")

    mailbox = text_of(section(page(client, "/web/w/default/project-b/"), "mailbox-heading"))

    assert mailbox.count("Merge the release branch now that CI is green?") == 1
    assert "Merge the release?" not in mailbox  # the subject's short form
    assert "reply_project" not in mailbox and "options:" not in mailbox  # the raw body
    assert "decision from default/project-a" in mailbox
    assert "merge Merge now (recommended) wait wait" in mailbox
    assert "QA signed off yesterday. The changelog is written." in mailbox
    assert "requires root" not in mailbox
