"""Sign-in throttling (django-axes): five wrong passwords for a username from one address
lock that pair out, on the web login and the admin login alike."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from projects.models import Project
from tests.conftest import ApiCall, Persona

LOGINS = ["/accounts/login/", "/admin/login/"]
LIMIT = 5


@pytest.fixture
def admin(db: None) -> User:
    return User.objects.create_superuser("admin", "admin@example.test", "admin-password")


def sign_in(client: Client, login: str, username: str, password: str) -> int:
    response = client.post(login, {"username": username, "password": password})
    return response.status_code


def fail(client: Client, login: str, username: str, times: int) -> None:
    for _ in range(times):
        sign_in(client, login, username, "wrong-password")


@pytest.mark.parametrize("login", LOGINS)
def test_five_wrong_passwords_lock_out_even_the_right_one(
    client: Client, auth_on: str, admin: User, login: str
) -> None:
    fail(client, login, "admin", LIMIT)
    response = client.post(login, {"username": "admin", "password": "admin-password"})
    assert response.status_code == 429
    markup = response.content.decode()
    # Our own page, not axes' plain text nor the login form again.
    assert "<title>Too many attempts · ai-memory</title>" in markup
    assert "paused after 5 wrong passwords" in markup
    assert "Try again in 15 minutes" in markup
    assert "_auth_user_id" not in client.session
    assert client.get("/web/").status_code == 302


@pytest.mark.parametrize("login", LOGINS)
def test_a_user_below_the_limit_still_signs_in(
    client: Client, auth_on: str, admin: User, login: str
) -> None:
    fail(client, login, "admin", LIMIT - 1)
    assert sign_in(client, login, "admin", "admin-password") == 302
    assert client.get("/web/").status_code == 200


def test_a_successful_sign_in_forgets_the_earlier_failures(
    client: Client, auth_on: str, alice: Persona
) -> None:
    fail(client, "/accounts/login/", "alice", LIMIT - 1)
    assert sign_in(client, "/accounts/login/", "alice", "alice-password") == 302
    client.logout()
    fail(client, "/accounts/login/", "alice", LIMIT - 1)
    assert sign_in(client, "/accounts/login/", "alice", "alice-password") == 302


def test_the_lock_holds_one_username_from_one_address(
    auth_on: str, alice: Persona, bob: Persona
) -> None:
    fail(Client(REMOTE_ADDR="192.0.2.1"), "/accounts/login/", "alice", LIMIT)
    # Another user from the same address, and alice from elsewhere, are not locked out.
    from_there, from_elsewhere = Client(REMOTE_ADDR="192.0.2.1"), Client(REMOTE_ADDR="192.0.2.2")
    assert sign_in(from_there, "/accounts/login/", "bob", "bob-password") == 302
    assert sign_in(from_elsewhere, "/accounts/login/", "alice", "alice-password") == 302
    assert (
        sign_in(Client(REMOTE_ADDR="192.0.2.1"), "/accounts/login/", "alice", "alice-password")
        == 429
    )


def test_the_web_and_admin_logins_count_failures_together(
    client: Client, auth_on: str, admin: User
) -> None:
    fail(client, "/accounts/login/", "admin", LIMIT - 2)
    fail(client, "/admin/login/", "admin", 2)
    assert sign_in(client, "/admin/login/", "admin", "admin-password") == 429


def test_api_tokens_are_not_throttled_by_a_locked_out_sign_in(
    client: Client, api: ApiCall, auth_on: str, alice: Persona, alices_open: Project
) -> None:
    fail(client, "/accounts/login/", "alice", LIMIT)
    assert sign_in(client, "/accounts/login/", "alice", "alice-password") == 429
    # Bearer tokens never go through authenticate(): wrong ones are plain 401s that count
    # toward no lock, and alice's agents keep working while her sign-in is locked.
    scope = {"workspace": "default", "project": "commons"}
    for _ in range(LIMIT + 1):
        assert api("get", "/api/v1/messages", scope, token="aim_wrong")[0] == 401
    status, body = api("get", "/api/v1/messages", scope, token=alice.token)
    assert status == 200, body
