"""Django admin: an admin manages projects, grants and tokens there."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from projects.auth import token_hash
from projects.models import ApiToken, Grant, Project
from tests.conftest import Persona


@pytest.fixture
def admin_client(client: Client, db: None) -> Client:
    admin = User.objects.create_superuser("admin", "admin@example.test", "admin-password")
    client.force_login(admin)
    return client


@pytest.mark.parametrize(
    "model", ["workspace", "project", "grant", "apitoken", "agentsession", "activity"]
)
def test_every_projects_model_has_an_admin_page(
    admin_client: Client, alices_restricted: Project, model: str
) -> None:
    assert admin_client.get(f"/admin/projects/{model}/").status_code == 200


def test_messages_are_read_only_in_admin(admin_client: Client) -> None:
    assert admin_client.get("/admin/messaging/message/").status_code == 200
    assert admin_client.get("/admin/messaging/message/add/").status_code == 403


def test_adding_a_token_shows_its_key_once_and_stores_only_the_hash(
    admin_client: Client, bob: Persona
) -> None:
    response = admin_client.post(
        "/admin/projects/apitoken/add/", {"user": bob.user.pk, "name": "ci"}, follow=True
    )
    assert response.status_code == 200
    [key] = re.findall(r"aim_[A-Za-z0-9_-]{43}", response.content.decode())
    token = ApiToken.objects.get(name="ci")
    assert token.user == bob.user
    assert token.key_hash == token_hash(key)
    later = admin_client.get(f"/admin/projects/apitoken/{token.pk}/change/")
    assert key not in later.content.decode()


def test_revoke_action_revokes(admin_client: Client, alice: Persona) -> None:
    token = ApiToken.objects.get(user=alice.user)
    admin_client.post(
        "/admin/projects/apitoken/",
        {"action": "revoke", "_selected_action": [token.pk]},
    )
    token.refresh_from_db()
    assert token.revoked_at is not None


def test_grants_are_managed_inline_on_the_project(
    admin_client: Client, alices_restricted: Project
) -> None:
    page = admin_client.get(f"/admin/projects/project/{alices_restricted.pk}/change/")
    assert page.status_code == 200
    assert "bob" in page.content.decode()
    assert Grant.objects.filter(project=alices_restricted).count() == 1
