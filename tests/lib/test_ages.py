"""The one age rule of the web pages and the CLI."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from aimemory_site.lib.ages import age_text

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
