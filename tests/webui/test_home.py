"""/web/: one card per readable project, inbox badges and the pending-mail summary."""

from __future__ import annotations

import re
from datetime import UTC

import pytest
from django.test import Client

from projects.models import Activity, Project
from tests.conftest import Persona, make_project
from tests.messaging.conftest import send
from tests.webui.conftest import cards, deliver, element, page, text_of

TOOLTIP = 'title="Messages from other projects waiting for an agent here"'


@pytest.fixture
def three_projects(db: None) -> list[Project]:
    """default/project-a, default/project-b and tools/zeta on an anonymous server."""
    return [
        make_project(None, "default", "project-a"),
        make_project(None, "default", "project-b"),
        make_project(None, "tools", "zeta"),
    ]


def test_cards_are_grouped_by_workspace(client: Client, three_projects: list[Project]) -> None:
    html = page(client, "/web/")
    assert list(cards(html)) == ["default/project-a", "default/project-b", "tools/zeta"]
    assert text_of(element(html, "workspace-1")) == "default"
    assert text_of(element(html, "workspace-2")) == "tools"
    assert '<section class="workspace" aria-labelledby="workspace-1">' in html


def test_a_card_has_an_amber_inbox_badge_only_when_mail_waits(
    client: Client, three_projects: list[Project]
) -> None:
    send(to="project-b")
    send(to="project-b")
    by_name = cards(page(client, "/web/"))
    assert "badge--inbox" in by_name["default/project-b"]
    assert TOOLTIP in by_name["default/project-b"]
    assert "2 inbox" in text_of(by_name["default/project-b"])
    for quiet in ("default/project-a", "tools/zeta"):
        assert "badge" not in by_name[quiet]
        assert "inbox" not in text_of(by_name[quiet])


def test_a_card_shows_the_last_activity(client: Client, three_projects: list[Project]) -> None:
    send(to="project-b")
    by_name = cards(page(client, "/web/"))
    assert text_of(by_name["default/project-b"]) == "project-b 1 inbox message received just now"
    assert text_of(by_name["tools/zeta"]) == "zeta project tools/zeta created just now"


def test_a_cards_age_is_a_time_element_with_the_exact_moment(
    client: Client, three_projects: list[Project]
) -> None:
    send(to="project-b")
    latest = Activity.objects.filter(project__name="project-b").latest("created_at", "id")
    moment = latest.created_at.astimezone(UTC)  # TIME_ZONE is UTC
    card = cards(page(client, "/web/"))["default/project-b"]
    assert (
        f'<time datetime="{moment.isoformat()}" title="{moment:%Y-%m-%d %H:%M} UTC">just now</time>'
    ) in card


def test_no_summary_and_no_badge_when_nothing_is_pending(
    client: Client, three_projects: list[Project]
) -> None:
    html = page(client, "/web/")
    assert 'id="inbox-summary"' not in html
    assert "waiting for agents" not in html
    assert "badge" not in html


def test_summary_of_one_message_is_singular(client: Client, three_projects: list[Project]) -> None:
    send(to="project-b")
    summary = element(page(client, "/web/"), "inbox-summary")
    assert text_of(summary) == "✉ 1 message waiting for agents in default/project-b (1)."
    assert '<a href="/web/w/default/project-b/">default/project-b</a>' in summary


def test_summary_names_most_mail_first_then_workspace_and_project(
    client: Client, three_projects: list[Project]
) -> None:
    make_project(None, "alpha-ws", "zeta")
    make_project(None, "default", "aardvark")
    for to in ("tools/zeta", "default/project-b", "default/aardvark", "alpha-ws/zeta"):
        deliver(to, sender="default/project-a")
    deliver("default/project-a", sender="tools/zeta")
    deliver("default/project-a", sender="tools/zeta")
    summary = element(page(client, "/web/"), "inbox-summary")
    assert text_of(summary) == (
        "✉ 6 messages waiting for agents in default/project-a (2), alpha-ws/zeta (1), "
        "default/aardvark (1), default/project-b (1), tools/zeta (1)."
    )
    links = re.findall(r'href="([^"]+)"', summary)
    assert links == [
        "/web/w/default/project-a/",
        "/web/w/alpha-ws/zeta/",
        "/web/w/default/aardvark/",
        "/web/w/default/project-b/",
        "/web/w/tools/zeta/",
    ]


@pytest.mark.parametrize(
    ("holding_mail", "tail"), [(6, "and 1 more project."), (8, "and 3 more projects.")]
)
def test_summary_names_at_most_five_projects_and_counts_the_rest(
    client: Client, db: None, holding_mail: int, tail: str
) -> None:
    make_project(None, "default", "sender")
    for n in range(1, holding_mail + 1):
        make_project(None, "default", f"p{n}")
        for _ in range(n):
            send(to=f"p{n}", sender="sender")
    summary = element(page(client, "/web/"), "inbox-summary")
    total = holding_mail * (holding_mail + 1) // 2
    named = ", ".join(f"default/p{n} ({n})" for n in range(holding_mail, holding_mail - 5, -1))
    assert text_of(summary) == f"✉ {total} messages waiting for agents in {named} {tail}"
    assert summary.count("<a ") == 5


def test_an_empty_server_says_there_are_no_projects(client: Client, db: None) -> None:
    html = page(client, "/web/")
    assert "No projects yet." in html
    assert cards(html) == {}


def test_an_anonymous_server_shows_every_project_without_login(client: Client, db: None) -> None:
    make_project(None, "default", "sender")
    make_project(None, "default", "vault", restricted=True)
    send(to="vault", sender="sender")
    by_name = cards(page(client, "/web/"))
    assert "1 inbox" in text_of(by_name["default/vault"])


def test_a_viewer_sees_only_readable_cards_and_counts(
    client: Client, alice: Persona, bob: Persona, charlie: Persona, alices_restricted: Project
) -> None:
    make_project(alice, "default", "commons")
    send(to="alpha", sender="commons")
    send(to="alpha", sender="commons")
    send(to="commons", sender="alpha")

    client.force_login(charlie.user)
    html = page(client, "/web/")
    assert list(cards(html)) == ["default/commons"]
    assert "alpha" not in html
    assert text_of(element(html, "inbox-summary")) == (
        "✉ 1 message waiting for agents in default/commons (1)."
    )

    client.force_login(bob.user)
    html = page(client, "/web/")
    assert list(cards(html)) == ["default/alpha", "default/commons"]
    assert "2 inbox" in text_of(cards(html)["default/alpha"])
    assert text_of(element(html, "inbox-summary")) == (
        "✉ 3 messages waiting for agents in default/alpha (2), default/commons (1)."
    )
