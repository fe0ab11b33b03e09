"""Each page runs a fixed number of SQL queries, however many projects and messages."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

import pytest
from django.test import Client

from projects.models import Page
from tests.conftest import Persona, make_project
from tests.webui.conftest import deliver, page

NumQueries = Callable[[int], AbstractContextManager[object]]

# Anonymous server: is auth on (one EXISTS on tokens), then the readable projects with
# their latest activity and pending counts.
HOME_QUERIES_ANONYMOUS = 2
# Logged-in user: the session and the user come first, and "Waiting on you" last (the
# pending questions with the user's grants on their projects, docs/reference.md#waiting-on-you).
HOME_QUERIES_USER = 5
# Anonymous server: is auth on, the project, five messages with their senders, the
# pending count, the recent activity with counterparts, which of those are readable, and
# the pages (no body).
PROJECT_QUERIES_ANONYMOUS = 7
PROJECT_QUERIES_USER = 9
# The live regions (docs/operating.md#the-web-mailbox): the home's are its queries, the first
# without the latest activity; the project page's Mailbox and Recent Activity are its project,
# messages, count, recent activity with counterparts and which senders and counterparts are
# readable. A 304 costs the same: the digest is of the regions rendered.
HOME_LIVE_QUERIES_ANONYMOUS = 2
HOME_LIVE_QUERIES_USER = 5
PROJECT_LIVE_QUERIES_ANONYMOUS = 6
PROJECT_LIVE_QUERIES_USER = 8
# A page: is auth on, then the page among the readable projects' pages (one query).
PAGE_QUERIES_ANONYMOUS = 2
PAGE_QUERIES_USER = 4


def _projects_with_mail(count: int, owner: Persona | None = None) -> None:
    """``count`` projects in two workspaces, each holding one message from the next."""
    names = [f"{'even' if n % 2 == 0 else 'odd'}/p{n}" for n in range(count)]
    for name in names:
        workspace, project = name.split("/")
        make_project(owner, workspace, project)
    for n, name in enumerate(names):
        deliver(name, names[(n + 1) % count])


@pytest.mark.parametrize("count", [1, 50])
def test_home_for_an_anonymous_server(
    client: Client, db: None, django_assert_num_queries: NumQueries, count: int
) -> None:
    _projects_with_mail(count)
    with django_assert_num_queries(HOME_QUERIES_ANONYMOUS):
        html = page(client, "/web/")
    assert html.count('class="card"') == count


@pytest.mark.parametrize("count", [1, 50])
def test_home_for_a_logged_in_user(
    client: Client, alice: Persona, django_assert_num_queries: NumQueries, count: int
) -> None:
    _projects_with_mail(count, owner=alice)
    client.force_login(alice.user)
    with django_assert_num_queries(HOME_QUERIES_USER):
        html = page(client, "/web/")
    assert html.count('class="card"') == count


def _mailbox_with(count: int) -> None:
    """default/inbox holding ``count`` messages, each from its own sender project."""
    make_project(None, "default", "inbox")
    for n in range(count):
        make_project(None, "senders", f"s{n}")
        deliver("default/inbox", f"senders/s{n}", subject=f"request {n}")


@pytest.mark.parametrize("count", [1, 7])
def test_project_page_for_an_anonymous_server(
    client: Client, db: None, django_assert_num_queries: NumQueries, count: int
) -> None:
    _mailbox_with(count)
    with django_assert_num_queries(PROJECT_QUERIES_ANONYMOUS):
        html = page(client, "/web/w/default/inbox/")
    assert html.count('class="message"') == min(count, 5)


@pytest.mark.parametrize("count", [1, 7])
def test_project_page_for_a_logged_in_user(
    client: Client, bob: Persona, django_assert_num_queries: NumQueries, count: int
) -> None:
    _mailbox_with(count)
    client.force_login(bob.user)
    with django_assert_num_queries(PROJECT_QUERIES_USER):
        html = page(client, "/web/w/default/inbox/")
    assert html.count('class="message"') == min(count, 5)


def _pages_in_inbox(count: int) -> None:
    """default/inbox (one message waiting) holding ``count`` pages, every third pinned."""
    _mailbox_with(1)
    project = make_project(None, "default", "inbox")
    Page.objects.bulk_create(
        Page(project=project, path=f"notes/p{n:02}", body="x" * 5000, pinned=n % 3 == 0)
        for n in range(count)
    )


@pytest.mark.parametrize("count", [0, 50])
def test_project_page_with_pages_for_an_anonymous_server(
    client: Client, db: None, django_assert_num_queries: NumQueries, count: int
) -> None:
    _pages_in_inbox(count)
    with django_assert_num_queries(PROJECT_QUERIES_ANONYMOUS):
        html = page(client, "/web/w/default/inbox/")
    assert html.count('class="pages__entry"') == count


@pytest.mark.parametrize("count", [0, 50])
def test_project_page_with_pages_for_a_logged_in_user(
    client: Client, bob: Persona, django_assert_num_queries: NumQueries, count: int
) -> None:
    _pages_in_inbox(count)
    client.force_login(bob.user)
    with django_assert_num_queries(PROJECT_QUERIES_USER):
        html = page(client, "/web/w/default/inbox/")
    assert html.count('class="pages__entry"') == count


@pytest.mark.parametrize("path", ["notes/p07", "notes/missing"])
def test_page_view_for_an_anonymous_server(
    client: Client, db: None, django_assert_num_queries: NumQueries, path: str
) -> None:
    _pages_in_inbox(50)
    with django_assert_num_queries(PAGE_QUERIES_ANONYMOUS):
        response = client.get(f"/web/w/default/inbox/pages/{path}")
    assert response.status_code == (200 if path == "notes/p07" else 404)


@pytest.mark.parametrize("path", ["notes/p07", "notes/missing"])
def test_page_view_for_a_logged_in_user(
    client: Client, bob: Persona, django_assert_num_queries: NumQueries, path: str
) -> None:
    _pages_in_inbox(50)
    client.force_login(bob.user)
    with django_assert_num_queries(PAGE_QUERIES_USER):
        response = client.get(f"/web/w/default/inbox/pages/{path}")
    assert response.status_code == (200 if path == "notes/p07" else 404)


def _live_twice(client: Client, path: str, assert_num_queries: NumQueries, queries: int) -> str:
    """GET the live regions at ``path``, then again with their ETag (the 304), each
    within ``queries``; return the regions."""
    with assert_num_queries(queries):
        response = client.get(path)
    assert response.status_code == 200
    with assert_num_queries(queries):
        unchanged = client.get(path, headers={"If-None-Match": response["ETag"]})
    assert unchanged.status_code == 304
    return response.content.decode()


@pytest.mark.parametrize("count", [1, 50])
def test_home_live_regions_for_an_anonymous_server(
    client: Client, db: None, django_assert_num_queries: NumQueries, count: int
) -> None:
    _projects_with_mail(count)
    regions = _live_twice(
        client, "/web/live/", django_assert_num_queries, HOME_LIVE_QUERIES_ANONYMOUS
    )
    assert regions.count('class="badge badge--inbox"') == count


@pytest.mark.parametrize("count", [1, 50])
def test_home_live_regions_for_a_logged_in_user(
    client: Client, alice: Persona, django_assert_num_queries: NumQueries, count: int
) -> None:
    _projects_with_mail(count, owner=alice)
    client.force_login(alice.user)
    regions = _live_twice(client, "/web/live/", django_assert_num_queries, HOME_LIVE_QUERIES_USER)
    assert regions.count('class="badge badge--inbox"') == count


@pytest.mark.parametrize("count", [1, 7])
def test_project_live_regions_for_an_anonymous_server(
    client: Client, db: None, django_assert_num_queries: NumQueries, count: int
) -> None:
    _mailbox_with(count)
    regions = _live_twice(
        client,
        "/web/w/default/inbox/live/",
        django_assert_num_queries,
        PROJECT_LIVE_QUERIES_ANONYMOUS,
    )
    assert regions.count('class="message"') == min(count, 5)
    # Each receipt names its sender, and "project created" comes last.
    assert regions.count('class="activity__entry"') == count + 1


@pytest.mark.parametrize("count", [1, 7])
def test_project_live_regions_for_a_logged_in_user(
    client: Client, bob: Persona, django_assert_num_queries: NumQueries, count: int
) -> None:
    _mailbox_with(count)
    client.force_login(bob.user)
    regions = _live_twice(
        client, "/web/w/default/inbox/live/", django_assert_num_queries, PROJECT_LIVE_QUERIES_USER
    )
    assert regions.count('class="message"') == min(count, 5)
    assert regions.count('class="activity__entry"') == count + 1
