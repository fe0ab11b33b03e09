"""Each page runs a fixed number of SQL queries, however many projects and messages."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

import pytest
from django.test import Client

from tests.conftest import Persona, make_project
from tests.webui.conftest import deliver, page

NumQueries = Callable[[int], AbstractContextManager[object]]

# Anonymous server: is auth on (one EXISTS on tokens), the readable projects with their
# latest activity, and one grouped count of pending messages.
HOME_QUERIES_ANONYMOUS = 3
# Logged-in user: the session and the user come first.
HOME_QUERIES_USER = 5
# Anonymous server: is auth on, the project, five messages with their senders, the
# pending count, the recent activity with counterparts, and which of those are readable.
PROJECT_QUERIES_ANONYMOUS = 6
PROJECT_QUERIES_USER = 8


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
