"""How much database time a request gets, counted from its arrival in a stall
(``aimemory_site.db_deadline``); the end-to-end bound is in tests/faults/test_outage.py."""

from __future__ import annotations

from time import monotonic, sleep

from aimemory_site.db_deadline import (
    ARRIVED_AT,
    MINIMUM_DATABASE_SECONDS,
    REQUEST_DATABASE_SECONDS,
    DatabaseTimeout,
    budget_since_arrival,
)


def test_a_request_that_waited_behind_a_healthy_database_keeps_its_whole_budget() -> None:
    """Slow clients or a burst held the threads, not the database: no false 503."""
    DatabaseTimeout("an earlier stall, over before this request arrived")
    arrived_at = monotonic()
    sleep(0.3)  # the request waits for a thread: the wait is what is measured

    assert budget_since_arrival({ARRIVED_AT: arrived_at}) == REQUEST_DATABASE_SECONDS


def test_a_request_that_waited_through_a_stall_keeps_what_is_left_since_its_arrival() -> None:
    arrived_at = monotonic() - 1.0
    DatabaseTimeout("a request ahead of it ran out of time")

    budget = budget_since_arrival({ARRIVED_AT: arrived_at})

    assert budget <= REQUEST_DATABASE_SECONDS - 1.0
    assert budget > REQUEST_DATABASE_SECONDS - 1.0 - 0.5  # the time this test itself took


def test_a_request_that_waited_a_whole_budget_through_a_stall_keeps_the_minimum() -> None:
    arrived_at = monotonic() - 2 * REQUEST_DATABASE_SECONDS
    DatabaseTimeout("a request ahead of it ran out of time")

    assert budget_since_arrival({ARRIVED_AT: arrived_at}) == MINIMUM_DATABASE_SECONDS


def test_a_request_from_another_server_has_the_whole_budget() -> None:
    """Without our worker's stamp (runserver, the test client) the wait is unknown."""
    DatabaseTimeout("a stall")

    assert budget_since_arrival({"REQUEST_METHOD": "GET"}) == REQUEST_DATABASE_SECONDS
