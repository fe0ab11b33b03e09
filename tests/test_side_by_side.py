"""The lock that lets a test marked ``alone`` run while no test of the other side-by-side
run of .ci/run does (tests/conftest.py). ``flock`` locks belong to an open file, so two
threads opening the file each stand for the two runs."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests import conftest

# How long a blocked turn is given to show it is blocked; a turn that should go on does
# so at once, so the positive waits below are generous.
BLOCKED_FOR_S = 0.5
GOES_ON_WITHIN_S = 10


def _turn_in_thread(
    alone: bool, entered: threading.Event, leave: threading.Event
) -> threading.Thread:
    def run() -> None:
        with conftest._side_by_side_turn(alone=alone):
            entered.set()
            leave.wait(GOES_ON_WITHIN_S)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def lock_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "side-by-side.lock"
    monkeypatch.setattr(conftest, "SIDE_BY_SIDE_LOCK", str(path))
    return path


@pytest.mark.usefixtures("lock_file")
@pytest.mark.parametrize(
    ("first_alone", "second_alone"),
    [(False, True), (True, False)],
    ids=["an alone test waits for the other run's", "the other run waits for an alone test"],
)
def test_a_test_of_one_run_waits_while_the_other_runs_test_holds_it_off(
    first_alone: bool, second_alone: bool
) -> None:
    first_in, first_out = threading.Event(), threading.Event()
    first = _turn_in_thread(first_alone, first_in, first_out)
    assert first_in.wait(GOES_ON_WITHIN_S)

    second_in, second_out = threading.Event(), threading.Event()
    second = _turn_in_thread(second_alone, second_in, second_out)
    assert not second_in.wait(BLOCKED_FOR_S)

    first_out.set()
    assert second_in.wait(GOES_ON_WITHIN_S)
    second_out.set()
    first.join(GOES_ON_WITHIN_S)
    second.join(GOES_ON_WITHIN_S)


@pytest.mark.usefixtures("lock_file")
def test_tests_of_both_runs_that_are_not_alone_go_side_by_side() -> None:
    first_in, first_out = threading.Event(), threading.Event()
    second_in, second_out = threading.Event(), threading.Event()
    first = _turn_in_thread(False, first_in, first_out)
    second = _turn_in_thread(False, second_in, second_out)
    assert first_in.wait(GOES_ON_WITHIN_S)
    assert second_in.wait(GOES_ON_WITHIN_S)
    first_out.set()
    second_out.set()
    first.join(GOES_ON_WITHIN_S)
    second.join(GOES_ON_WITHIN_S)
