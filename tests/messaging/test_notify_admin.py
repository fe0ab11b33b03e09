"""Notification targets in Django admin (docs/reference.md#notifications): the URL is typed
once, must parse, and is shown masked ever after; the delivery log is read-only."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from messaging.models import NotificationTarget
from tests.conftest import Persona

SECRET_URL = "ntfy://alice:s3cretpass@ntfy.example/alice-topic"


@pytest.fixture
def admin_client(client: Client, db: None) -> Client:
    admin = User.objects.create_superuser("admin", "admin@example.test", "admin-password")
    client.force_login(admin)
    return client


def test_a_saved_target_is_shown_masked_only(admin_client: Client, alice: Persona) -> None:
    added = admin_client.post(
        "/admin/messaging/notificationtarget/add/",
        {"user": alice.user.pk, "url": SECRET_URL, "label": "phone", "enabled": "on"},
    )
    assert added.status_code == 302
    target = NotificationTarget.objects.get()
    assert target.url == SECRET_URL

    listing = admin_client.get("/admin/messaging/notificationtarget/").content.decode()
    change = admin_client.get(
        f"/admin/messaging/notificationtarget/{target.pk}/change/"
    ).content.decode()

    for page in (listing, change):
        assert "s3cretpass" not in page
        assert "ntfy://alice:****@ntfy.example/" in page


def test_an_unparsable_url_is_refused_in_admin(admin_client: Client, alice: Persona) -> None:
    refused = admin_client.post(
        "/admin/messaging/notificationtarget/add/",
        {"user": alice.user.pk, "url": "nonsense://what", "label": "", "enabled": "on"},
    )

    assert refused.status_code == 200
    assert "Apprise cannot parse this URL" in refused.content.decode()
    assert not NotificationTarget.objects.exists()


def test_the_delivery_log_is_read_only(admin_client: Client) -> None:
    assert admin_client.get("/admin/messaging/notificationdelivery/").status_code == 200
    assert admin_client.get("/admin/messaging/notificationdelivery/add/").status_code == 403
