"""``ai-memory manage`` and the commands of docs/operating.md#authentication, as an admin runs them."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from pytest_django.fixtures import Settings as SettingsWrapper

from aimemory_site.lib.errors import Unauthorized
from projects.auth import principal_from_authorization
from projects.models import ApiToken, Grant, Project
from tests.conftest import Persona, make_project

pytestmark = pytest.mark.django_db


@pytest.fixture
def secret(alice: Persona) -> Project:
    return make_project(alice, "acme", "secretproj", restricted=True)


def test_grant_sets_changes_and_removes_a_grant(secret: Project, bob: Persona) -> None:
    call_command("grant", "bob", "acme/secretproj", "read", stdout=io.StringIO())
    assert Grant.objects.get(user=bob.user, project=secret).level == "read"

    call_command("grant", "bob", "acme/secretproj", "write", stdout=io.StringIO())
    assert Grant.objects.get(user=bob.user, project=secret).level == "write"

    call_command("grant", "bob", "acme/secretproj", "none", stdout=io.StringIO())
    assert not Grant.objects.filter(user=bob.user).exists()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["nobody", "acme/secretproj", "read"], "no user 'nobody'"),
        (["bob", "acme/nothere", "read"], "no project 'acme/nothere'"),
    ],
)
def test_grant_refuses_what_does_not_exist(
    secret: Project, bob: Persona, arguments: list[str], message: str
) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("grant", *arguments)
    assert not Grant.objects.exists()


def test_project_mode_opens_and_restricts(secret: Project) -> None:
    call_command("project_mode", "acme/secretproj", "open", stdout=io.StringIO())
    secret.refresh_from_db()
    assert secret.access_mode == Project.AccessMode.OPEN
    with pytest.raises(CommandError, match="no project"):
        call_command("project_mode", "acme/none", "open")


def test_create_user_takes_the_password_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AI_MEMORY_USER_PASSWORD", "a long password")
    call_command("create_user", "erin", "--superuser", stdout=io.StringIO())
    monkeypatch.delenv("AI_MEMORY_USER_PASSWORD")
    call_command("create_user", "frank", stdout=io.StringIO())

    erin, frank = User.objects.get(username="erin"), User.objects.get(username="frank")
    assert erin.is_superuser and erin.check_password("a long password")
    assert not frank.is_superuser and not frank.has_usable_password()
    with pytest.raises(CommandError, match="already exists"):
        call_command("create_user", "erin")


@pytest.mark.django_db(transaction=True)
def test_ai_memory_manage_runs_them_with_the_server_settings(tmp_path: Path) -> None:
    env = {**os.environ, "AI_MEMORY_DATA_DIR": str(tmp_path)}
    env.pop("DATABASE_URL", None)

    def manage(*arguments: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "aimemory_site.cli.main", "manage", *arguments],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    assert manage("migrate", "--verbosity", "0").returncode == 0
    created = manage("create_user", "gina")
    token = manage("issue_token", "gina", "--name", "ci")
    missing = manage("grant", "gina", "acme/nothere", "read")

    assert created.returncode == 0, created.stderr
    assert created.stdout.strip() == "created user gina"
    assert token.returncode == 0 and token.stdout.strip().startswith("aim_")
    assert missing.returncode == 1
    assert "no project 'acme/nothere'" in missing.stderr


def _issue_token(*arguments: str) -> tuple[str, str]:
    """``issue_token ARGUMENTS``: its stdout and its stderr."""
    out, err = io.StringIO(), io.StringIO()
    call_command("issue_token", *arguments, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_the_first_user_token_says_that_clients_now_need_a_token() -> None:
    """No root token and no user token yet: this token turns authentication on."""
    key, warning = _issue_token("erin", "--create-user")

    assert key.strip().startswith("aim_") and key.strip() == key.strip().split()[0]
    assert key.count("\n") == 1  # the key alone on stdout, for `$(...)`
    assert "Authentication is now on" in warning
    assert "AI_MEMORY_AUTH_TOKEN" in warning
    assert "Authorization: Bearer <key>" in warning
    assert "--header" in warning


@pytest.mark.parametrize(
    ("public_url", "bind", "mcp_url"),
    [
        ("https://memory.example.com", "127.0.0.1:8000", "https://memory.example.com/mcp"),
        ("", "0.0.0.0:9123", "http://0.0.0.0:9123/mcp"),
        ("", "unix:/run/ai-memory.sock", "<server URL>/mcp"),
    ],
    ids=["public URL", "bind address", "unix socket"],
)
def test_the_first_tokens_mcp_example_names_the_servers_own_url(
    settings: SettingsWrapper, public_url: str, bind: str, mcp_url: str
) -> None:
    """The address people reach the server at when it is set, else the serve address."""
    settings.AI_MEMORY_PUBLIC_URL = public_url
    settings.AI_MEMORY_BIND = bind

    _, warning = _issue_token("erin", "--create-user")

    assert f"ai-memory {mcp_url} --header" in warning
    assert ("8000" in warning) == ("8000" in mcp_url)


def test_a_token_on_a_server_with_a_root_token_says_nothing_of_authentication(
    auth_on: str,
) -> None:
    key, notice = _issue_token("erin", "--create-user")

    assert key.strip().startswith("aim_")
    assert "Authentication is now on" not in notice
    assert "AI_MEMORY_AUTH_TOKEN" not in notice


def test_a_token_when_users_already_hold_tokens_says_nothing_of_authentication(
    alice: Persona,
) -> None:
    key, notice = _issue_token("erin", "--create-user")

    assert key.strip().startswith("aim_")
    assert "Authentication is now on" not in notice
    assert "AI_MEMORY_AUTH_TOKEN" not in notice


def test_revoke_token_revokes_the_token_of_the_prefix_shown(alice: Persona) -> None:
    token = ApiToken.objects.get(user=alice.user)
    out = io.StringIO()

    call_command("revoke_token", token.prefix, stdout=out)

    token.refresh_from_db()
    assert token.revoked_at is not None
    assert f"Revoked token {token.prefix}" in out.getvalue()
    with pytest.raises(Unauthorized):
        principal_from_authorization(f"Bearer {alice.token}")


def test_revoke_token_takes_the_prefix_with_its_ellipsis_or_the_whole_key(
    alice: Persona, bob: Persona
) -> None:
    alice_token = ApiToken.objects.get(user=alice.user)
    call_command("revoke_token", f"{alice_token.prefix}…", stdout=io.StringIO())
    call_command("revoke_token", bob.token, stdout=io.StringIO())

    assert not ApiToken.objects.filter(revoked_at__isnull=True).exists()


def test_revoke_token_refuses_an_unknown_prefix(alice: Persona) -> None:
    with pytest.raises(CommandError, match="no token with the prefix 'aim_nothere'"):
        call_command("revoke_token", "aim_nothere")
    assert not ApiToken.objects.filter(revoked_at__isnull=False).exists()


def test_revoke_token_refuses_a_prefix_several_tokens_share(alice: Persona) -> None:
    token = ApiToken.objects.get(user=alice.user)
    ApiToken.objects.create(user=alice.user, key_hash="other", prefix=token.prefix)

    with pytest.raises(CommandError, match="2 tokens have the prefix"):
        call_command("revoke_token", token.prefix)
    assert not ApiToken.objects.filter(revoked_at__isnull=False).exists()


def test_ai_memory_manage_revoke_token_exits_1_when_none_matches(tmp_path: Path) -> None:
    env = {**os.environ, "AI_MEMORY_DATA_DIR": str(tmp_path)}
    subprocess.run(
        [sys.executable, "-m", "aimemory_site.cli.main", "manage", "migrate"],
        env=env, capture_output=True, check=True,
    )  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "aimemory_site.cli.main", "manage", "revoke_token", "aim_nothere"],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert "no token with the prefix" in done.stderr
