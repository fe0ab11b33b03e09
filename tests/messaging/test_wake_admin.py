"""Wake webhooks in Django admin (docs/reference.md#wake-webhooks): the URL must be one
the server calls, a generic webhook's secret is shown once, and no secret ever again."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from messaging.models import WakeWebhook
from projects.models import Project

ADD = "/admin/messaging/wakewebhook/add/"


@pytest.fixture
def admin_client(client: Client, db: None) -> Client:
    admin = User.objects.create_superuser("admin", "admin@example.test", "admin-password")
    client.force_login(admin)
    return client


def _pages(admin_client: Client, webhook: WakeWebhook) -> list[str]:
    return [
        admin_client.get("/admin/messaging/wakewebhook/").content.decode(),
        admin_client.get(f"/admin/messaging/wakewebhook/{webhook.pk}/change/").content.decode(),
    ]


def test_a_generic_webhooks_secret_is_shown_once(admin_client: Client, project_b: Project) -> None:
    added = admin_client.post(
        ADD,
        {
            "project": project_b.pk,
            "url": "https://hooks.example.com/bot",
            "dialect": "generic",
            "secret": "",
            "enabled": "on",
        },
        follow=True,
    )

    webhook = WakeWebhook.objects.get()
    assert webhook.secret.startswith("whsec_")
    assert f"shown only this once: {webhook.secret}" in added.content.decode()
    for page in _pages(admin_client, webhook):
        assert webhook.secret not in page
        assert "https://hooks.example.com/bot" in page


def test_a_routines_token_is_never_shown(admin_client: Client, project_b: Project) -> None:
    admin_client.post(
        ADD,
        {
            "project": project_b.pk,
            "url": "https://api.anthropic.com/v1/claude_code/routines/trig_01/fire",
            "dialect": "claude-routine",
            "secret": "sk-ant-oat01-routine-token",
            "enabled": "on",
        },
    )

    webhook = WakeWebhook.objects.get()
    assert webhook.secret == "sk-ant-oat01-routine-token"
    for page in _pages(admin_client, webhook):
        assert "sk-ant-oat01" not in page


def test_a_plain_http_url_is_refused_in_admin(admin_client: Client, project_b: Project) -> None:
    refused = admin_client.post(
        ADD,
        {
            "project": project_b.pk,
            "url": "http://hooks.example.com/bot",
            "dialect": "generic",
            "secret": "",
            "enabled": "on",
        },
    )

    assert refused.status_code == 200
    assert "must be https://" in refused.content.decode()
    assert not WakeWebhook.objects.exists()


def test_enabling_again_by_hand_starts_afresh(admin_client: Client, project_b: Project) -> None:
    webhook = WakeWebhook.objects.create(
        project=project_b,
        url="https://hooks.example.com/bot",
        secret="whsec_x",
        enabled=False,
        failures=5,
        disabled_reason="disabled after 5 failed attempts in a row; the last: answered HTTP 500",
    )

    changed = admin_client.post(
        f"/admin/messaging/wakewebhook/{webhook.pk}/change/", {"enabled": "on"}
    )

    assert changed.status_code == 302
    webhook.refresh_from_db()
    assert (webhook.enabled, webhook.failures, webhook.disabled_reason) == (True, 0, "")
    assert webhook.secret == "whsec_x"
