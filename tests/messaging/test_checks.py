from __future__ import annotations

from pathlib import Path

from pytest_django.fixtures import Settings as SettingsWrapper

from messaging.checks import notify_urls_check, sanitize_config_check


def test_a_bad_sanitize_config_fails_the_system_check(
    settings: SettingsWrapper, tmp_path: Path
) -> None:
    config = tmp_path / "ai-memory.toml"
    config.write_text('[sanitize]\nextra_patterns = ["(unclosed"]\n')
    settings.AI_MEMORY_CONFIG = str(config)
    [error] = sanitize_config_check()
    assert error.id == "messaging.E001"
    assert str(config) in error.msg


def test_a_good_sanitize_config_passes(settings: SettingsWrapper, tmp_path: Path) -> None:
    config = tmp_path / "ai-memory.toml"
    config.write_text('[sanitize]\nextra_patterns = ["ACME-[0-9]{6}"]\n')
    settings.AI_MEMORY_CONFIG = str(config)
    assert sanitize_config_check() == []


def test_an_unparsable_server_wide_notification_url_fails_the_system_check(
    settings: SettingsWrapper,
) -> None:
    settings.AI_MEMORY_NOTIFY_URLS = "json://127.0.0.1:9/ok, nonsense://secret-in-url"

    [error] = notify_urls_check()

    assert error.id == "messaging.E003"
    assert error.msg.startswith("AI_MEMORY_NOTIFY_URLS: target 2 ")
    assert "secret-in-url" not in error.msg  # the URL is a credential: never said


def test_parsable_server_wide_notification_urls_pass(settings: SettingsWrapper) -> None:
    settings.AI_MEMORY_NOTIFY_URLS = "json://127.0.0.1:9/a ntfy://ntfy.example/topic"

    assert notify_urls_check() == []
