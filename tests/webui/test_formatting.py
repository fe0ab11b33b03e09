"""The ages and snippets the pages print."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from webui.selectors import snippet
from webui.templatetags.webui import age_text

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("age", "text"),
    [
        (timedelta(seconds=-30), "just now"),
        (timedelta(seconds=0), "just now"),
        (timedelta(seconds=59), "just now"),
        (timedelta(seconds=60), "1 minute ago"),
        (timedelta(minutes=2), "2 minutes ago"),
        (timedelta(minutes=59, seconds=59), "59 minutes ago"),
        (timedelta(hours=1), "1 hour ago"),
        (timedelta(hours=23), "23 hours ago"),
        (timedelta(days=1), "1 day ago"),
        (timedelta(days=29), "29 days ago"),
        (timedelta(days=30), "1 month ago"),
        (timedelta(days=75), "2 months ago"),
        (timedelta(days=359), "11 months ago"),
        (timedelta(days=360), "1 year ago"),
        (timedelta(days=365 * 3 + 10), "3 years ago"),
    ],
)
def test_age_reads_in_the_largest_whole_unit(age: timedelta, text: str) -> None:
    assert age_text(NOW - age, NOW) == text


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
