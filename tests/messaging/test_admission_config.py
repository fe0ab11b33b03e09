"""Admission webhook config: defaults, bounds, strictness, both sources, the system check."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from pytest_django.fixtures import Settings as SettingsWrapper

from messaging.admission_config import (
    MAX_ADMISSION_WEBHOOKS,
    AdmissionWebhook,
    admission_webhooks_configured,
)
from messaging.checks import admission_config_check

REPO_ROOT = Path(__file__).resolve().parents[2]
HOOK = {"name": "policy", "url": "http://127.0.0.1:9/admit", "events": ["message_send"]}


@pytest.fixture(autouse=True)
def _no_inherited_hooks(settings: SettingsWrapper) -> None:
    settings.AI_MEMORY_ADMISSION_WEBHOOKS_JSON = ""


def _json(settings: SettingsWrapper, *webhooks: Any) -> tuple[AdmissionWebhook, ...]:
    settings.AI_MEMORY_ADMISSION_WEBHOOKS_JSON = json.dumps(list(webhooks))
    return admission_webhooks_configured()


def _toml(settings: SettingsWrapper, tmp_path: Path, text: str) -> Path:
    config = tmp_path / "ai-memory.toml"
    config.write_text(text)
    settings.AI_MEMORY_CONFIG = str(config)
    return config


def test_no_config_means_no_hooks() -> None:
    assert admission_webhooks_configured() == ()


def test_defaults(settings: SettingsWrapper) -> None:
    [hook] = _json(settings, HOOK)
    assert hook == AdmissionWebhook(
        name="policy",
        url="http://127.0.0.1:9/admit",
        events=frozenset({"message_send"}),
        timeout_ms=2000,
        failure_policy="ignore",
        blocking=True,
    )
    assert not hook.deciding


@pytest.mark.parametrize(
    ("failure_policy", "blocking", "deciding"),
    [("reject", True, True), ("reject", False, False), ("ignore", True, False)],
)
def test_only_blocking_reject_hooks_decide(
    settings: SettingsWrapper, failure_policy: str, blocking: bool, deciding: bool
) -> None:
    [hook] = _json(settings, {**HOOK, "failure_policy": failure_policy, "blocking": blocking})
    assert hook.deciding is deciding


@pytest.mark.parametrize(("given", "used"), [(0, 1), (-5, 1), (250, 250), (99_999, 30_000)])
def test_timeout_ms_is_clamped_to_1_to_30000(
    settings: SettingsWrapper, given: int, used: int
) -> None:
    [hook] = _json(settings, {**HOOK, "timeout_ms": given})
    assert hook.timeout_ms == used


def test_the_toml_table_is_read_in_order(settings: SettingsWrapper, tmp_path: Path) -> None:
    _toml(
        settings,
        tmp_path,
        """
[sanitize]
allowlist = []

[[admission_webhooks]]
name = "gate"
url = "https://policy.example/admit"
events = ["message_send", "message_pop"]
failure_policy = "reject"
timeout_ms = 500

[[admission_webhooks]]
name = "watch"
url = "http://127.0.0.1:9/watch"
events = ["message_cancel"]
blocking = false
""",
    )
    gate, watch = admission_webhooks_configured()
    assert (gate.name, gate.deciding, gate.timeout_ms) == ("gate", True, 500)
    assert gate.events == {"message_send", "message_pop"}
    assert (watch.name, watch.deciding, watch.blocking) == ("watch", False, False)


def test_a_toml_file_without_the_table_has_no_hooks(
    settings: SettingsWrapper, tmp_path: Path
) -> None:
    _toml(settings, tmp_path, '[sanitize]\nallowlist = ["x"]\n')
    assert admission_webhooks_configured() == ()


def test_sixteen_hooks_are_allowed_and_seventeen_are_not(settings: SettingsWrapper) -> None:
    hooks = [{**HOOK, "name": f"hook-{i}"} for i in range(MAX_ADMISSION_WEBHOOKS + 1)]
    assert len(_json(settings, *hooks[:MAX_ADMISSION_WEBHOOKS])) == MAX_ADMISSION_WEBHOOKS
    with pytest.raises(ImproperlyConfigured, match="17 webhooks; at most 16 are allowed"):
        _json(settings, *hooks)


@pytest.mark.parametrize(
    ("change", "fault"),
    [
        ({"failure-policy": "reject"}, "unknown key(s): failure-policy"),
        ({"failure_policy": "deny"}, "failure_policy must be"),
        ({"name": ""}, "name must be a non-empty string"),
        ({"name": 7}, "name must be a non-empty string"),
        ({"url": "ftp://127.0.0.1/admit"}, "url must be an http:// or https:// URL"),
        ({"url": "http://"}, "url must be an http:// or https:// URL"),
        ({"events": []}, "events must be a non-empty list"),
        ({"events": "message_send"}, "events must be a non-empty list"),
        ({"events": ["message_list"]}, "events must be a non-empty list"),
        ({"timeout_ms": "2000"}, "timeout_ms must be an integer"),
        ({"timeout_ms": 1.5}, "timeout_ms must be an integer"),
        ({"timeout_ms": True}, "timeout_ms must be an integer"),
        ({"blocking": "yes"}, "blocking must be true or false"),
    ],
)
def test_a_bad_value_or_key_is_an_error(
    settings: SettingsWrapper, change: dict[str, Any], fault: str
) -> None:
    with pytest.raises(ImproperlyConfigured) as bad:
        _json(settings, {**HOOK, **change})
    assert str(bad.value).startswith("AI_MEMORY_ADMISSION_WEBHOOKS_JSON[0]: ")
    assert fault in str(bad.value)


@pytest.mark.parametrize("key", ["name", "url", "events"])
def test_name_url_and_events_are_required(settings: SettingsWrapper, key: str) -> None:
    hook = {k: v for k, v in HOOK.items() if k != key}
    with pytest.raises(ImproperlyConfigured, match=f"missing required key\\(s\\): {key}"):
        _json(settings, hook)


def test_hook_names_are_unique(settings: SettingsWrapper) -> None:
    with pytest.raises(ImproperlyConfigured, match="duplicate webhook name"):
        _json(settings, HOOK, HOOK)


@pytest.mark.parametrize(
    ("text", "fault"),
    [("{not json", "not valid JSON"), ('{"name": "x"}', "must be a JSON list"), ("[1]", "[0]")],
)
def test_bad_json_is_an_error(settings: SettingsWrapper, text: str, fault: str) -> None:
    settings.AI_MEMORY_ADMISSION_WEBHOOKS_JSON = text
    with pytest.raises(ImproperlyConfigured) as bad:
        admission_webhooks_configured()
    assert fault in str(bad.value)


def test_a_bad_toml_hook_names_the_file(settings: SettingsWrapper, tmp_path: Path) -> None:
    config = _toml(
        settings,
        tmp_path,
        '[[admission_webhooks]]\nname = "gate"\nurl = "http://127.0.0.1:9/"\n'
        'events = ["message_send"]\nfailure_policy = "deny"\n',
    )
    with pytest.raises(ImproperlyConfigured) as bad:
        admission_webhooks_configured()
    assert str(bad.value).startswith(f"AI_MEMORY_CONFIG ({config}): [[admission_webhooks]][0]: ")


def test_admission_webhooks_must_be_an_array_of_tables(
    settings: SettingsWrapper, tmp_path: Path
) -> None:
    _toml(settings, tmp_path, 'admission_webhooks = "none"\n')
    with pytest.raises(ImproperlyConfigured, match="must be an array of tables"):
        admission_webhooks_configured()


def test_an_unreadable_config_file_is_an_error(settings: SettingsWrapper, tmp_path: Path) -> None:
    settings.AI_MEMORY_CONFIG = str(tmp_path / "missing.toml")
    with pytest.raises(ImproperlyConfigured, match="cannot read the file"):
        admission_webhooks_configured()


def test_json_with_a_toml_file_without_hooks_uses_the_json(
    settings: SettingsWrapper, tmp_path: Path
) -> None:
    _toml(settings, tmp_path, '[sanitize]\nallowlist = ["x"]\n')
    [hook] = _json(settings, HOOK)
    assert hook.name == "policy"


def test_hooks_in_both_places_are_refused_as_ambiguous(
    settings: SettingsWrapper, tmp_path: Path
) -> None:
    _toml(
        settings,
        tmp_path,
        '[[admission_webhooks]]\nname = "gate"\nurl = "http://127.0.0.1:9/"\n'
        'events = ["message_send"]\n',
    )
    with pytest.raises(ImproperlyConfigured, match="admission webhooks are set twice"):
        _json(settings, HOOK)


def test_a_bad_admission_config_fails_the_system_check(settings: SettingsWrapper) -> None:
    settings.AI_MEMORY_ADMISSION_WEBHOOKS_JSON = json.dumps([{**HOOK, "blocking": "no"}])
    [error] = admission_config_check()
    assert error.id == "messaging.E002"
    assert "AI_MEMORY_ADMISSION_WEBHOOKS_JSON[0]: blocking must be true or false" in error.msg


def test_a_good_admission_config_passes_the_system_check(settings: SettingsWrapper) -> None:
    settings.AI_MEMORY_ADMISSION_WEBHOOKS_JSON = json.dumps([HOOK])
    assert admission_config_check() == []


def test_the_environment_variable_reaches_the_check_that_stops_a_start(tmp_path: Path) -> None:
    """``manage.py check`` (which ``migrate``, and so ``ai-memory serve``, runs first)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AI_MEMORY_")}
    env |= {
        "AI_MEMORY_DATA_DIR": str(tmp_path),
        "AI_MEMORY_ADMISSION_WEBHOOKS_JSON": json.dumps([{**HOOK, "timeout": 5}]),
    }
    checked = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert checked.returncode != 0
    assert "messaging.E002" in checked.stderr
    assert "unknown key(s): timeout" in checked.stderr
