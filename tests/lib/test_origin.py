"""Origins as the request guard compares them (docs/reference.md#json-api): scheme, host
and port, whatever the spelling, and the ``AI_MEMORY_ALLOWED_ORIGINS`` list."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from aimemory_site.lib.origin import allowed_origins_parse, origin_normalise


@pytest.mark.parametrize(
    ("value", "normal"),
    [
        ("http://localhost:5173", "http://localhost:5173"),
        ("HTTP://LocalHost:5173", "http://localhost:5173"),
        ("http://localhost:5173/", "http://localhost:5173"),
        ("http://app.example:80", "http://app.example"),
        ("https://app.example:443", "https://app.example"),
        ("https://app.example:80", "https://app.example:80"),
        ("http://app.example:443", "http://app.example:443"),
        ("http://[::1]:8000", "http://[::1]:8000"),
        ("http://[::1]:80", "http://[::1]"),
        ("  https://app.example  ", "https://app.example"),
    ],
)
def test_an_origin_is_normalised_to_scheme_host_and_port(value: str, normal: str) -> None:
    assert origin_normalise(value) == normal


@pytest.mark.parametrize(
    "value",
    [
        "",
        "null",
        "*",
        "localhost:5173",
        "http://",
        "http://[::1",
        "http://app.example:99999",
        "http://app.example:port",
        "http://user:secret@app.example",
        "http://app.example/path",
        "http://app.example/?q=1",
        "http://app.example/#top",
    ],
)
def test_what_names_no_origin_normalises_to_none(value: str) -> None:
    assert origin_normalise(value) is None


def test_the_allowed_origins_setting_is_a_comma_separated_list_of_origins() -> None:
    parsed = allowed_origins_parse(" HTTP://LocalHost:5173, https://app.example:443/ ,, ")

    assert parsed == ("http://localhost:5173", "https://app.example")
    assert allowed_origins_parse("") == ()


@pytest.mark.parametrize("entry", ["*", "localhost:5173", "http://app.example/path", "null"])
def test_an_allowed_origin_that_is_no_origin_stops_the_server(entry: str) -> None:
    with pytest.raises(ImproperlyConfigured) as raised:
        allowed_origins_parse(f"http://localhost:5173,{entry}")

    assert str(raised.value) == (
        f"AI_MEMORY_ALLOWED_ORIGINS: {entry!r} is not an origin; give each as "
        "scheme://host[:port], such as http://localhost:5173, separated by commas"
    )
