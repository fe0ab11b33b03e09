"""API tokens: shown once, stored as a keyed hash, revocable (docs/architecture.md#data-model and docs/operating.md#authentication)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from projects.auth import token_hash
from projects.models import ApiToken, Project
from projects.services import api_token_revoke
from tests.conftest import ApiCall, Persona

BRIEFING = "/api/v1/briefing?workspace=default&project=commons"


def test_key_is_never_stored(alice: Persona) -> None:
    token = ApiToken.objects.get(user=alice.user)
    assert alice.token.startswith("aim_")
    stored = [str(getattr(token, f.attname)) for f in ApiToken._meta.concrete_fields]
    assert not any(alice.token in value for value in stored)
    assert token.key_hash == token_hash(alice.token)
    assert token.prefix == alice.token[:12]


def test_valid_token_authenticates_and_records_use(
    api: ApiCall, alice: Persona, alices_open: Project
) -> None:
    assert ApiToken.objects.get(user=alice.user).last_used_at is None
    status, _ = api("get", BRIEFING, token=alice.token)
    assert status == 200
    assert ApiToken.objects.get(user=alice.user).last_used_at is not None


def test_revoked_token_gets_401(api: ApiCall, alice: Persona, alices_open: Project) -> None:
    api_token_revoke(token=ApiToken.objects.get(user=alice.user))
    status, body = api("get", BRIEFING, token=alice.token)
    assert status == 401
    assert body == {"detail": "invalid or revoked token", "code": "unauthorized"}


def test_unknown_token_gets_401(api: ApiCall, alice: Persona, alices_open: Project) -> None:
    status, body = api("get", BRIEFING, token="aim_not-a-real-token")
    assert status == 401
    assert body["code"] == "unauthorized"


def test_missing_token_gets_401_once_tokens_exist(
    api: ApiCall, alice: Persona, alices_open: Project
) -> None:
    status, body = api("get", BRIEFING)
    assert status == 401
    assert body["code"] == "unauthorized"


def test_revoking_the_last_token_does_not_reopen_the_server(
    api: ApiCall, alice: Persona, alices_open: Project
) -> None:
    api_token_revoke(token=ApiToken.objects.get(user=alice.user))
    assert api("get", BRIEFING)[0] == 401


def test_root_token_authenticates(api: ApiCall, auth_on: str, alices_open: Project) -> None:
    assert api("get", BRIEFING, token=auth_on)[0] == 200
    assert api("get", BRIEFING, token=auth_on + "x")[0] == 401


@pytest.mark.django_db
def test_anonymous_server_needs_no_token(api: ApiCall) -> None:
    status, body = api(
        "post",
        "/api/v1/sessions",
        {"workspace": "default", "project": "solo", "session_id": "s1"},
    )
    assert status == 200
    assert body["project"] == "solo"


@pytest.mark.django_db
def test_issue_token_command_prints_a_working_key_once() -> None:
    out, err = StringIO(), StringIO()
    call_command("issue_token", "dora", "--create-user", "--name", "ci", stdout=out, stderr=err)
    key = out.getvalue().strip()
    assert key.startswith("aim_")
    assert ApiToken.objects.get(key_hash=token_hash(key)).user.username == "dora"
    assert key not in err.getvalue()


@pytest.mark.django_db
def test_issue_token_command_refuses_an_unknown_user() -> None:
    with pytest.raises(CommandError, match="--create-user"):
        call_command("issue_token", "nobody")
