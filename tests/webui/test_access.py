"""Who may see the web pages, and that they answer GET only."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from projects.models import Project
from tests.conftest import Persona, make_project
from tests.webui.conftest import cards, deliver, page, text_of

PAGES = ["/web/", "/web/w/", "/web/w/default/", "/web/w/default/alpha/"]


@pytest.mark.parametrize("path", PAGES)
@pytest.mark.parametrize("method", ["post", "put", "delete"])
def test_unsafe_methods_are_refused_with_405(db: None, path: str, method: str) -> None:
    client = Client(enforce_csrf_checks=True)
    response = getattr(client, method)(path)
    assert response.status_code == 405
    assert response["Allow"] == "GET"


@pytest.mark.parametrize("path", PAGES)
def test_with_auth_on_a_visitor_is_sent_to_the_login_page(
    client: Client, auth_on: str, path: str
) -> None:
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next={path}"


def test_the_login_page_signs_a_user_in_and_returns_to_the_page(
    client: Client, auth_on: str, alice: Persona, alices_restricted: Project
) -> None:
    login = page(client, "/accounts/login/?next=/web/w/default/alpha/")
    assert "<title>Sign in · ai-memory</title>" in login
    assert 'name="username"' in login and 'name="password"' in login
    response = client.post(
        "/accounts/login/",
        {"username": "alice", "password": "alice-password", "next": "/web/w/default/alpha/"},
    )
    assert response.status_code == 302
    assert response["Location"] == "/web/w/default/alpha/"
    html = page(client, "/web/w/default/alpha/")
    assert '<h1 class="page-title">default/alpha</h1>' in html
    assert "alice Sign out" in text_of(html)


def test_a_wrong_password_is_refused_on_the_login_page(
    client: Client, auth_on: str, alice: Persona
) -> None:
    response = client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
    assert response.status_code == 200
    assert "Please enter a correct username and password." in response.content.decode()
    assert client.get("/web/").status_code == 302


def test_user_tokens_alone_turn_login_on(client: Client, alice: Persona) -> None:
    assert client.get("/web/").status_code == 302


def test_a_superuser_sees_every_project(
    client: Client, charlie: Persona, alices_restricted: Project
) -> None:
    root = User.objects.create_superuser("operator", password="operator-password")
    client.force_login(root)
    assert list(cards(page(client, "/web/"))) == ["default/alpha"]
    client.force_login(charlie.user)
    assert cards(page(client, "/web/")) == {}


def test_an_anonymous_server_needs_no_login_and_shows_everything(client: Client, db: None) -> None:
    make_project(None, "default", "sender")
    make_project(None, "default", "vault", restricted=True)
    deliver("default/vault", "default/sender", subject="in the vault")
    assert "1 inbox" in text_of(cards(page(client, "/web/"))["default/vault"])
    assert "in the vault" in page(client, "/web/w/default/vault/")
    assert "Sign out" not in page(client, "/web/")


def test_the_root_url_leads_to_the_mailbox(client: Client) -> None:
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"] == "/web/"
