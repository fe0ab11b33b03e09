"""The counts of parked calls under the caps (``lib.wait_caps``): exact per host and per
caller, shared by forked processes, and a newer wait of one place taking its place."""

from __future__ import annotations

import os
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aimemory_site.lib.wait_caps import CapReached, WaitCounts, limits_from_environment


def test_a_caller_at_its_cap_is_refused_and_others_are_not() -> None:
    counts = WaitCounts(host_limit=10, caller_limit=2)
    counts.take("alice")
    counts.take("alice")

    with pytest.raises(CapReached) as refused:
        counts.take("alice")

    assert refused.value.which == "caller"
    counts.take("bob")
    assert (counts.held_by("alice"), counts.held_by("bob"), counts.parked()) == (2, 1, 3)


def test_the_host_at_its_cap_refuses_everyone() -> None:
    counts = WaitCounts(host_limit=2, caller_limit=5)
    counts.take("alice")
    counts.take("bob")

    with pytest.raises(CapReached) as refused:
        counts.take("charlie")

    assert refused.value.which == "host"
    counts.give_back("bob")
    counts.take("charlie")
    assert counts.parked() == 2


def test_a_refused_wait_counts_nothing() -> None:
    counts = WaitCounts(host_limit=1, caller_limit=1)
    counts.take("alice", "session:1")
    with pytest.raises(CapReached):
        counts.take("bob", "session:2")
    counts.give_back("alice", "session:1")
    counts.take("bob", "session:2")  # session:2 holds no place left behind by the refusal
    assert (counts.parked(), counts.held_by("alice"), counts.held_by("bob")) == (1, 0, 1)


def test_a_newer_wait_of_a_place_counts_once_until_both_are_gone() -> None:
    counts = WaitCounts(host_limit=1, caller_limit=1)
    counts.take("alice", "session:1")
    counts.take("alice", "session:1")  # the newer wait of the session: no new place

    assert counts.parked() == 1
    counts.give_back("alice", "session:1")  # the older one, superseded, answers
    assert counts.parked() == 1
    counts.give_back("alice", "session:1")
    assert counts.parked() == 0


def test_forked_processes_count_against_one_host_cap() -> None:
    counts = WaitCounts(host_limit=3, caller_limit=3)
    counts.take("alice")
    children = []
    for _ in range(2):
        pid = os.fork()
        if pid == 0:  # the child takes one wait and leaves it counted
            try:
                counts.take("alice")
                os._exit(0)
            except BaseException:
                os._exit(1)
        children.append(pid)
    assert all(os.waitpid(pid, 0)[1] == 0 for pid in children)

    assert counts.parked() == 3
    with pytest.raises(CapReached):
        counts.take("bob")


def test_of_the_host_s_processes_the_first_to_ask_takes_a_publications_claimer_wake() -> None:
    counts = WaitCounts(host_limit=3, caller_limit=3)
    taken = os.pipe()
    children = []
    for _ in range(4):
        pid = os.fork()
        if pid == 0:  # each process receives publication 7 of two topics
            try:
                mine = [counts.claimer_wake_take(t, 7) for t in ("inbox:a", "inbox:b")]
                os.write(taken[1], bytes(mine))
                os._exit(0)
            except BaseException:
                os._exit(1)
        children.append(pid)
    assert all(os.waitpid(pid, 0)[1] == 0 for pid in children)
    os.close(taken[1])
    with os.fdopen(taken[0], "rb") as answers:
        wins = answers.read()

    assert len(wins) == 8
    assert sum(wins[0::2]) == 1 and sum(wins[1::2]) == 1  # one process per topic
    assert not counts.claimer_wake_take("inbox:a", 7)  # nor this one, later
    assert counts.claimer_wake_take("inbox:a", 8)  # the next publication is anyone's


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["take", "give_back"]), st.integers(0, 40)),
        max_size=300,
    )
)
def test_the_tables_agree_with_a_plain_count(operations: list[tuple[str, int]]) -> None:
    """Many callers taking and giving back in any order, with removals shifting entries
    back through runs of colliding keys in a small table."""
    counts = WaitCounts(host_limit=20, caller_limit=3)
    expected: Counter[str] = Counter()
    for operation, who in operations:
        caller = f"caller-{who}"
        if operation == "take":
            if sum(expected.values()) >= 20 or expected[caller] >= 3:
                with pytest.raises(CapReached):
                    counts.take(caller)
            else:
                counts.take(caller)
                expected[caller] += 1
        elif expected[caller]:
            counts.give_back(caller)
            expected[caller] -= 1
        for held in {caller, *expected}:
            assert counts.held_by(held) == expected[held]
    assert counts.parked() == sum(expected.values())


@pytest.mark.parametrize(
    ("environ", "limits"),
    [
        ({}, (10_000, 200)),
        ({"AI_MEMORY_MAX_WAITS": "20_000", "AI_MEMORY_MAX_WAITS_PER_CALLER": "0"}, (20_000, 0)),
    ],
)
def test_the_limits_come_from_the_environment(
    environ: dict[str, str], limits: tuple[int, int]
) -> None:
    assert limits_from_environment(environ) == limits


def test_a_limit_that_is_not_a_whole_number_is_refused() -> None:
    with pytest.raises(ValueError, match="AI_MEMORY_MAX_WAITS must be a whole number"):
        limits_from_environment({"AI_MEMORY_MAX_WAITS": "lots"})
