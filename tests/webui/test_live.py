"""The live regions' source (``/web/live/``, ``/web/w/<ws>/<project>/live/``): the pages'
own markup for their badges, summary and Mailbox, under the pages' access rules."""

from __future__ import annotations

import pytest
from django.http import HttpResponse
from django.test import Client

from aimemory_site.lib.principal import Principal
from messaging.models import Message
from messaging.services import message_cancel, message_pop
from projects.models import Project
from tests.conftest import Persona, make_project
from tests.webui.conftest import cards, deliver, live_regions, page, text_of

HOME_LIVE = "/web/live/"
B_LIVE = "/web/w/default/project-b/live/"


@pytest.fixture
def projects(db: None) -> list[Project]:
    return [make_project(None, "default", name) for name in ("project-a", "project-b", "quiet")]


def live(client: Client, path: str, etag: str | None = None) -> HttpResponse:
    headers = {"If-None-Match": etag} if etag else {}
    response = client.get(path, headers=headers)
    assert isinstance(response, HttpResponse)
    return response


def test_the_home_fragment_is_the_pages_badges_and_summary(
    client: Client, projects: list[Project]
) -> None:
    deliver("default/project-b", "default/project-a", subject="one")
    deliver("default/project-b", "default/project-a", subject="two")
    deliver("default/project-a", "default/project-b", subject="three")
    regions = live_regions(page(client, HOME_LIVE))
    assert regions == live_regions(page(client, "/web/"))
    assert list(regions) == [
        "waiting",
        "inbox-summary",
        "default/project-a",
        "default/project-b",
        "default/quiet",
    ]
    assert text_of(regions["inbox-summary"]) == (
        "✉ 3 messages waiting for agents in default/project-b (2), default/project-a (1)."
    )
    assert text_of(regions["default/project-b"]) == "2 inbox"
    assert "badge" not in regions["default/quiet"]


def test_the_home_fragment_with_nothing_pending_has_empty_regions(
    client: Client, projects: list[Project]
) -> None:
    regions = live_regions(page(client, HOME_LIVE))
    assert regions == live_regions(page(client, "/web/"))
    assert text_of(regions["inbox-summary"]) == ""
    assert all(text_of(markup) == "" for markup in regions.values())


def test_the_project_fragment_is_the_pages_mailbox_and_recent_activity(
    client: Client, projects: list[Project]
) -> None:
    for n in range(7):
        deliver("default/project-b", "default/project-a", subject=f"request {n}")
    regions = live_regions(page(client, B_LIVE))
    assert list(regions) == ["mailbox", "activity"]
    assert regions == live_regions(page(client, "/web/w/default/project-b/"))
    assert regions["mailbox"].count('class="message"') == 5
    assert "5 of 7 pending" in text_of(regions["mailbox"])
    assert regions["activity"].count('class="activity__entry"') == 8
    assert text_of(regions["activity"]).startswith(
        "Recent Activity message received from default/project-a"
    )


def test_an_unchanged_state_answers_304_with_no_body(
    client: Client, projects: list[Project]
) -> None:
    for path in (HOME_LIVE, B_LIVE):
        first = live(client, path)
        assert first.status_code == 200
        etag = first["ETag"]
        assert etag.startswith('"') and etag.endswith('"')
        assert "no-store" in first["Cache-Control"] and "private" in first["Cache-Control"]
        again = live(client, path, etag)
        assert again.status_code == 304
        assert again.content == b""
        assert again["ETag"] == etag
    stale = {path: live(client, path)["ETag"] for path in (HOME_LIVE, B_LIVE)}
    deliver("default/project-b", "default/project-a", subject="news")
    home, mailbox = (live(client, path, stale[path]) for path in (HOME_LIVE, B_LIVE))
    assert home.status_code == mailbox.status_code == 200
    assert "1 inbox" in text_of(home.content.decode())
    assert "news" in text_of(mailbox.content.decode())


def test_a_send_a_claim_and_a_cancel_each_change_the_fragment(
    client: Client, projects: list[Project]
) -> None:
    seen = [live(client, B_LIVE)["ETag"]]
    first = deliver("default/project-b", "default/project-a", subject="first")
    deliver("default/project-b", "default/project-a", subject="second")
    seen.append(live(client, B_LIVE)["ETag"])
    message_pop(
        principal=Principal.root(),
        workspace="default",
        project="project-b",
        message_id=str(first.pk),
    )
    after_claim = live(client, B_LIVE)
    seen.append(after_claim["ETag"])
    assert "first" not in text_of(after_claim.content.decode())
    message_cancel(principal=Principal.root(), workspace="default", project="project-a")
    after_cancel = live(client, B_LIVE)
    seen.append(after_cancel["ETag"])
    assert "No pending messages for this project." in text_of(after_cancel.content.decode())
    assert len(set(seen)) == 4
    # The Mailbox is back where it started; Recent Activity keeps the receipts and the claim.
    regions = live_regions(after_cancel.content.decode())
    assert regions["mailbox"] == live_regions(page(client, "/web/w/default/quiet/live/"))["mailbox"]
    assert regions["activity"].count('class="activity__entry"') == 4
    assert text_of(regions["activity"]).startswith(
        "Recent Activity message claimed from default/project-a"
    )


def test_reading_the_fragments_pops_and_cancels_nothing(
    client: Client, projects: list[Project]
) -> None:
    message = deliver("default/project-b", "default/project-a")
    for _ in range(3):
        page(client, B_LIVE)
        page(client, HOME_LIVE)
    message.refresh_from_db()
    assert message.state == Message.State.PENDING


def test_a_viewer_without_read_access_gets_what_a_missing_project_gives(
    client: Client, auth_on: str, alices_restricted: Project, charlie: Persona, bob: Persona
) -> None:
    make_project(None, "default", "sender")
    deliver("default/alpha", "default/sender", subject="for alpha's readers")
    client.force_login(charlie.user)
    restricted = live(client, "/web/w/default/alpha/live/")
    missing = live(client, "/web/w/default/no-such-project/live/")
    assert restricted.status_code == missing.status_code == 200
    assert restricted.content == missing.content
    assert restricted["ETag"] == missing["ETag"]
    assert "for alpha's readers" not in restricted.content.decode()
    home = page(client, HOME_LIVE)
    assert "alpha" not in home
    assert list(live_regions(home)) == ["waiting", "inbox-summary", "default/sender"]
    assert text_of(home) == ""
    client.force_login(bob.user)
    assert "for alpha&#x27;s readers" in page(client, "/web/w/default/alpha/live/")
    assert text_of(live_regions(page(client, HOME_LIVE))["default/alpha"]) == ("1 inbox")
    assert list(cards(page(client, "/web/"))) == ["default/alpha", "default/sender"]


@pytest.mark.parametrize("path", [HOME_LIVE, "/web/w/default/alpha/live/"])
def test_with_auth_on_a_visitor_is_sent_to_the_login_page(
    client: Client, auth_on: str, path: str
) -> None:
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next={path}"


@pytest.mark.parametrize("path", [HOME_LIVE, B_LIVE])
@pytest.mark.parametrize("method", ["post", "put", "delete"])
def test_unsafe_methods_get_the_405_page(db: None, path: str, method: str) -> None:
    response = getattr(Client(enforce_csrf_checks=True), method)(path)
    assert response.status_code == 405
    assert response["Allow"] == "GET"
    assert response["Content-Type"].startswith("text/html")


def test_an_unknown_live_path_gets_the_404_page(client: Client, db: None) -> None:
    response = client.get("/web/w/default/project-b/live/more/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")
    assert "<!DOCTYPE html>" in response.content.decode()
