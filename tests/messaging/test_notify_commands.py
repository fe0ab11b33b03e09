"""``ai-memory manage notify_add|notify_list|notify_remove|notify_test``
(docs/reference.md#notifications): a target's URL is a credential, shown masked."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from messaging.models import NotificationTarget
from tests.conftest import Persona
from tests.receivers import HttpReceiver, http_receiver

__all__ = ["http_receiver"]


def manage(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_add_prints_the_id_and_list_masks_the_secret(alice: Persona) -> None:
    target_id = manage("notify_add", "alice", "ntfy://alice:s3cretpass@ntfy.example/topic")

    [line] = manage("notify_list").splitlines()

    assert target_id.strip() == str(NotificationTarget.objects.get().pk)
    assert line.startswith(f"{target_id.strip()}\talice\t-\tntfy://alice:****@ntfy.example/")
    assert line.endswith("\tenabled")
    assert "s3cretpass" not in line


def test_an_unparsable_url_is_refused_in_one_line_and_nothing_is_saved(alice: Persona) -> None:
    with pytest.raises(CommandError) as refused:
        manage("notify_add", "alice", "nonsense://what")

    assert "Apprise cannot parse this URL" in str(refused.value)
    assert "\n" not in str(refused.value)
    assert not NotificationTarget.objects.exists()


def test_list_says_why_a_target_is_disabled_and_filters_by_user(
    alice: Persona, bob: Persona
) -> None:
    manage("notify_add", "alice", "json://127.0.0.1:9/alice", "--label", "laptop")
    manage("notify_add", "bob", "json://127.0.0.1:9/bob")
    NotificationTarget.objects.filter(user=bob.user).update(
        enabled=False, disabled_reason="disabled after 5 failed attempts in a row; the last: x"
    )

    [alices] = manage("notify_list", "alice").splitlines()
    [bobs] = manage("notify_list", "bob").splitlines()

    assert "\tlaptop\t" in alices and alices.endswith("\tenabled")
    assert bobs.endswith("\tdisabled: disabled after 5 failed attempts in a row; the last: x")


@pytest.mark.django_db(transaction=True)
def test_notify_test_sends_and_reenables(alice: Persona, http_receiver: HttpReceiver) -> None:
    target_id = manage("notify_add", "alice", http_receiver.url("alice")).strip()
    NotificationTarget.objects.update(enabled=False, failures=5, disabled_reason="x")

    said = manage("notify_test", target_id)

    assert said.strip() == f"sent a test notification to target {target_id}"
    assert http_receiver.next().body["title"] == "ai-memory: test notification"
    assert NotificationTarget.objects.filter(enabled=True, failures=0).count() == 1


@pytest.mark.django_db(transaction=True)
def test_notify_test_says_why_it_failed(alice: Persona, http_receiver: HttpReceiver) -> None:
    http_receiver.statuses["alice"] = 503
    target_id = manage("notify_add", "alice", http_receiver.url("alice")).strip()

    with pytest.raises(CommandError) as failed:
        manage("notify_test", target_id)

    assert str(failed.value).startswith("not sent: ")
    assert str(http_receiver.port) not in str(failed.value)


def test_remove_deletes_and_an_unknown_id_is_refused(alice: Persona) -> None:
    target_id = manage("notify_add", "alice", "json://127.0.0.1:9/alice").strip()

    assert manage("notify_remove", target_id).strip() == f"removed notification target {target_id}"
    with pytest.raises(CommandError):
        manage("notify_remove", target_id)
