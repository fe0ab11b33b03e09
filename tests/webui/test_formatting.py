"""The snippets the pages print."""

from __future__ import annotations

import pytest

from webui.selectors import snippet


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("short", "short"),
        ("  spread\n\tover\r\n  lines  ", "spread over lines"),
        ("x" * 160, "x" * 160),
        ("x" * 161, "x" * 160 + "…"),
        ("word " * 40, ("word " * 40)[:160] + "…"),
    ],
)
def test_snippet_collapses_whitespace_and_cuts_at_160(body: str, expected: str) -> None:
    assert snippet(body) == expected
