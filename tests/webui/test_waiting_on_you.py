"""The home page's "Waiting on you" (docs/reference.md#waiting-on-you): the pending
questions a signed-in user may answer, across projects, soonest deadline first.

alice owns two mailboxes (``default/operator`` and ``ops/desk``, restricted) and the asker
``default/orchestrator`` (restricted); bob reads all three, charlie has nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from pytest_django.fixtures import Settings as SettingsWrapper

from aimemory_site.lib.decisions import decision_body_write, decision_subject
from aimemory_site.lib.principal import Principal
from messaging.answer_selectors import answer_refusal, questions_waiting_on
from messaging.models import Message
from messaging.services import message_cancel, message_pop, message_send
from projects.models import Grant, Project
from tests.conftest import Persona, make_project
from tests.webui.conftest import element, live_regions, page, text_of

NumQueries = Callable[[int], AbstractContextManager[object]]
ROOT = Principal.root()
OPTIONS: list[dict[str, Any]] = [{"id": "go", "label": "Go"}, {"id": "stop", "label": "Stop"}]


def ask(
    question: str,
    *,
    to: str = "default/operator",
    reply_project: str = "default/orchestrator",
    requires_root: bool = False,
    deadline: str | None = None,
) -> Message:
    """A question from default/orchestrator to ``to``, sent as root."""
    workspace, project = to.split("/")
    return message_send(
        principal=ROOT,
        to_workspace=workspace,
        to_project=project,
        from_workspace="default",
        from_project="orchestrator",
        subject=decision_subject(question),
        body=decision_body_write(
            question,
            OPTIONS,
            requires_root=requires_root,
            reply_project=reply_project,
            deadline=deadline,
        ),
    ).message


@pytest.fixture
def projects(auth_on: str, alice: Persona, bob: Persona, charlie: Persona) -> list[Project]:
    made = [
        make_project(alice, "default", "operator", restricted=True),
        make_project(alice, "ops", "desk", restricted=True),
        make_project(alice, "default", "orchestrator", restricted=True),
    ]
    Grant.objects.bulk_create(
        Grant(user=bob.user, project=project, level=Grant.Level.READ) for project in made
    )
    return made


def signed_in(client: Client, persona: Persona | User) -> Client:
    client.force_login(persona.user if isinstance(persona, Persona) else persona)
    return client


def waiting(html: str) -> list[str]:
    """The section's entries as a reader sees them."""
    return [
        text_of(entry) for entry in re.findall(r'<li class="waiting__entry">(.*?)</li>', html, re.S)
    ]


def absent(html: str) -> bool:
    """No section, no heading: only the empty live region."""
    return (
        "Waiting on you" not in html
        and 'id="waiting-heading"' not in html
        and '<div class="live-waiting" data-live="waiting"></div>' in html
    )


def test_a_writer_sees_the_questions_across_projects_soonest_deadline_first(
    client: Client, projects: list[Project], alice: Persona
) -> None:
    oldest = ask("Merge the release?")
    later_deadline = ask("Rotate the keys?", to="ops/desk", deadline="3h")
    no_deadline = ask("Drop the old index?", to="ops/desk")
    sooner_deadline = ask("Ship the hotfix?", deadline="1h")
    html = page(signed_in(client, alice), "/web/")
    section = element(html, "waiting-list")
    entries = waiting(html)
    assert [entry.split(" asked by ")[0] for entry in entries] == [
        "Ship the hotfix?",
        "Rotate the keys?",
        "Merge the release?",
        "Drop the old index?",
    ]
    assert "Waiting on you 4 questions" in text_of(html)
    hotfix = entries[0]
    assert "asked by default/orchestrator" in hotfix and "in default/operator" in hotfix
    deadline = sooner_deadline.expires_at
    assert deadline is not None
    assert f"deadline {timezone.localtime(deadline):%Y-%m-%d %H:%M} UTC" in hotfix
    assert entries[2].endswith("in default/operator · no deadline")
    for question, mailbox in [
        (sooner_deadline, "default/operator"),
        (later_deadline, "ops/desk"),
        (oldest, "default/operator"),
        (no_deadline, "ops/desk"),
    ]:
        assert f'href="/web/w/{mailbox}/decisions/{question.pk}/"' in section
    # Above the project cards.
    assert html.index('id="waiting-heading"') < html.index('class="card"')


def test_a_reader_and_a_stranger_wait_on_nothing_and_see_no_section(
    client: Client, projects: list[Project], bob: Persona, charlie: Persona
) -> None:
    ask("Merge the release?")
    for persona in (bob, charlie):
        assert absent(page(signed_in(client, persona), "/web/"))


def test_with_no_question_the_section_is_absent(
    client: Client, projects: list[Project], alice: Persona
) -> None:
    assert absent(page(signed_in(client, alice), "/web/"))


def test_write_granted_on_both_projects_is_enough(
    client: Client, projects: list[Project], bob: Persona
) -> None:
    ask("Merge the release?")
    Grant.objects.filter(user=bob.user, project__name="operator").update(level="write")
    assert absent(page(signed_in(client, bob), "/web/"))  # not on the asker yet
    Grant.objects.filter(user=bob.user, project__name="orchestrator").update(level="write")
    assert [entry.split(" asked")[0] for entry in waiting(page(client, "/web/"))] == [
        "Merge the release?"
    ]


def test_a_requires_root_question_waits_only_on_root(
    client: Client, settings: SettingsWrapper, projects: list[Project], alice: Persona
) -> None:
    ask("Merge the release?", requires_root=True)
    assert absent(page(signed_in(client, alice), "/web/"))
    settings.AI_MEMORY_ROOT_USERNAME = "alice"
    [entry] = waiting(page(client, "/web/"))
    assert entry.startswith("Merge the release? requires root asked by default/orchestrator")
    root = User.objects.create_superuser("operator-root", password="x" * 12)
    assert len(waiting(page(signed_in(client, root), "/web/"))) == 1


def test_a_question_no_longer_pending_or_answerable_waits_on_no_one(
    client: Client, projects: list[Project], alice: Persona
) -> None:
    claimed = ask("Claimed?")
    message_pop(principal=ROOT, workspace="default", project="operator", message_id=str(claimed.pk))
    cancelled = ask("Cancelled?")
    message_cancel(
        principal=ROOT,
        workspace="default",
        project="orchestrator",
        message_id=str(cancelled.pk),
    )
    expired = ask("Expired?")
    Message.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    make_project(alice, "default", "bystander", restricted=True)
    ask("Elsewhere?", reply_project="default/bystander")  # answers would go to no asker
    ask("Nowhere?", reply_project="default/missing")
    still = ask("Still waiting?")
    assert [
        entry.split(" asked")[0] for entry in waiting(page(signed_in(client, alice), "/web/"))
    ] == ["Still waiting?"]
    assert [question.pk for question in questions_waiting_on(alice.principal)] == [still.pk]


def test_the_question_is_escaped(client: Client, projects: list[Project], alice: Persona) -> None:
    ask("Ship <script>alert(1)</script> now?")
    html = page(signed_in(client, alice), "/web/")
    assert "Ship &lt;script&gt;alert(1)&lt;/script&gt; now?" in element(html, "waiting-list")
    assert "<script>alert" not in html


def test_an_anonymous_server_shows_no_section(client: Client, db: None) -> None:
    make_project(None, "default", "operator")
    make_project(None, "default", "orchestrator")
    ask("Merge the release?")
    assert absent(page(client, "/web/"))


def test_the_live_region_is_the_pages_section(
    client: Client, projects: list[Project], alice: Persona
) -> None:
    ask("Merge the release?", deadline="2h")
    signed_in(client, alice)
    regions = live_regions(page(client, "/web/live/"))
    assert regions["waiting"] == live_regions(page(client, "/web/"))["waiting"]
    assert "Merge the release?" in text_of(regions["waiting"])
    ask("Ship the hotfix?", to="ops/desk")
    assert "Ship the hotfix?" in text_of(live_regions(page(client, "/web/live/"))["waiting"])


def test_the_rule_is_the_answer_pages_own(
    projects: list[Project],
    alice: Persona,
    bob: Persona,
    charlie: Persona,
    settings: SettingsWrapper,
) -> None:
    """For every persona and kind of question, the section lists exactly the pending
    questions ``answer_refusal`` lets that persona answer."""
    make_project(alice, "default", "bystander", restricted=True)
    Grant.objects.filter(user=bob.user, project__name="operator").update(level="write")
    Grant.objects.filter(user=bob.user, project__name="orchestrator").update(level="write")
    Grant.objects.filter(user=bob.user, project__name="desk").delete()
    settings.AI_MEMORY_ROOT_USERNAME = "bob"
    questions = [
        ask("Plain?"),
        ask("Root?", requires_root=True),
        ask("Desk?", to="ops/desk"),
        ask("Desk root?", to="ops/desk", requires_root=True),
        ask("Bystander?", reply_project="default/bystander"),
        ask("Missing?", reply_project="default/missing"),
    ]
    root = User.objects.create_superuser("operator-root", password="x" * 12)
    for user in (alice.user, bob.user, charlie.user, root):
        principal = Principal.for_user(user)
        expected = [
            question.pk
            for question in questions
            if _readable(principal, question)
            and answer_refusal(principal, question.to_project, question) is None
        ]
        assert sorted(q.pk for q in questions_waiting_on(principal)) == sorted(expected), user
    assert len(questions_waiting_on(Principal.for_user(alice.user))) == 2
    assert len(questions_waiting_on(Principal.for_user(bob.user))) == 2


def _readable(principal: Principal, question: Message) -> bool:
    from projects.access import Level, project_level_of

    return project_level_of(principal, question.to_project) > Level.NONE


# Queries -------------------------------------------------------------------------------

# With a root token set (no question whether authentication is on): the session, the
# user, the projects, and the section's one query. The live regions: the same.
HOME_QUERIES = 4
HOME_LIVE_QUERIES = 4


def _questions(count: int, alice: Persona, bob: Persona) -> None:
    """``count`` questions, each in a restricted mailbox of its own that bob writes."""
    for n in range(count):
        mailbox = make_project(alice, "many", f"m{n}", restricted=True)
        Grant.objects.create(user=bob.user, project=mailbox, level=Grant.Level.WRITE)
        ask(f"Question {n}?", to=f"many/m{n}", deadline=f"{n + 1}h")


@pytest.mark.parametrize("count", [1, 20])
def test_the_section_costs_one_query_however_many_questions(
    client: Client,
    projects: list[Project],
    alice: Persona,
    bob: Persona,
    django_assert_num_queries: NumQueries,
    count: int,
) -> None:
    Grant.objects.filter(user=bob.user, project__name="orchestrator").update(level="write")
    _questions(count, alice, bob)
    signed_in(client, bob)
    with django_assert_num_queries(HOME_QUERIES):
        html = page(client, "/web/")
    assert len(waiting(html)) == count
    with django_assert_num_queries(HOME_LIVE_QUERIES):
        fragment = page(client, "/web/live/")
    assert len(waiting(fragment)) == count
