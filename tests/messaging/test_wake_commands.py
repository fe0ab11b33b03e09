"""``ai-memory manage wake_add|wake_list|wake_remove`` (docs/reference.md#wake-webhooks):
a generic webhook's secret is printed once, alone on stdout; nothing lists a secret."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from pytest_django.fixtures import Settings as SettingsWrapper

from messaging.models import WakeWebhook
from projects.models import Project

ROUTINE_URL = "https://api.anthropic.com/v1/claude_code/routines/trig_01abc/fire"


def manage(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_add_prints_the_secret_alone_once_and_list_never_shows_it(project_b: Project) -> None:
    out, err = manage("wake_add", "default/project-b", "https://hooks.example.com/bot?key=k9")

    webhook = WakeWebhook.objects.get()
    assert out.strip() == webhook.secret and len(webhook.secret) >= 40
    assert "shown only once" in err and webhook.secret not in err
    [line] = manage("wake_list")[0].splitlines()
    assert line == (
        f"{webhook.pk}\tdefault/project-b\tgeneric\thttps://hooks.example.com/bot?****\tenabled"
    )
    assert webhook.secret not in line and "k9" not in line


def test_a_claude_routine_takes_its_token_which_is_never_listed(project_b: Project) -> None:
    out, _ = manage(
        "wake_add",
        "default/project-b",
        ROUTINE_URL,
        "--dialect",
        "claude-routine",
        "--token",
        "sk-ant-oat01-routine-token",
    )

    webhook = WakeWebhook.objects.get()
    assert webhook.secret == "sk-ant-oat01-routine-token"
    assert "sk-ant" not in out
    [line] = manage("wake_list", "default/project-b")[0].splitlines()
    assert "\tclaude-routine\t" in line and "sk-ant" not in line


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["http://hooks.example.com/bot"], "must be https://"),
        (["http://127.0.0.1:9/bot"], "AI_MEMORY_ALLOW_LOOPBACK_WEBHOOKS=1"),
        ([ROUTINE_URL, "--dialect", "claude-routine"], "needs --token"),
        (["https://hooks.example.com/bot", "--token", "t"], "--token is for claude-routine"),
    ],
)
def test_a_refused_webhook_is_one_line_and_nothing_is_saved(
    project_b: Project, settings: SettingsWrapper, args: list[str], said: str
) -> None:
    settings.AI_MEMORY_ALLOW_LOOPBACK_WEBHOOKS = False
    with pytest.raises(CommandError) as refused:
        manage("wake_add", "default/project-b", *args)

    assert said in str(refused.value) and "\n" not in str(refused.value)
    assert not WakeWebhook.objects.exists()


def test_an_unknown_project_is_refused(db: None) -> None:
    with pytest.raises(CommandError, match="no project 'default/nowhere'"):
        manage("wake_add", "default/nowhere", "https://hooks.example.com/bot")


def test_list_says_why_a_webhook_is_disabled_and_remove_removes_it(project_b: Project) -> None:
    manage("wake_add", "default/project-b", "https://hooks.example.com/bot")
    webhook = WakeWebhook.objects.get()
    WakeWebhook.objects.update(
        enabled=False,
        disabled_reason="disabled after 5 failed attempts in a row; the last: answered HTTP 500",
    )

    [line] = manage("wake_list")[0].splitlines()
    assert line.endswith(
        "\tdisabled: disabled after 5 failed attempts in a row; the last: answered HTTP 500"
    )

    assert manage("wake_remove", str(webhook.pk))[0].strip() == f"removed wake webhook {webhook.pk}"
    assert not WakeWebhook.objects.exists()
    with pytest.raises(CommandError, match=f"no wake webhook {webhook.pk}"):
        manage("wake_remove", str(webhook.pk))
