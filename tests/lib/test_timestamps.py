from datetime import UTC, datetime

from aimemory_site.lib.timestamps import rfc3339


def test_a_utc_moment_ends_in_z() -> None:
    moment = datetime(2026, 7, 28, 9, 30, 0, 123456, tzinfo=UTC)
    assert rfc3339(moment) == "2026-07-28T09:30:00.123456Z"


def test_no_moment_stays_none() -> None:
    assert rfc3339(None) is None
