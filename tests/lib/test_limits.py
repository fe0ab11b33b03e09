"""The shared limits: the list limit clamp and the text cap."""

from __future__ import annotations

import pytest

from aimemory_site.lib.limits import limit_clamp, text_cap, whole_number


@pytest.mark.parametrize(
    ("given", "used"), [(None, 50), (0, 1), (-5, 1), (1, 1), (200, 200), (500, 200)]
)
def test_list_limit_is_clamped_to_1_through_200(given: int | None, used: int) -> None:
    assert limit_clamp(given) == used


def test_long_text_is_cut_with_a_marker_counting_omitted_chars() -> None:
    assert text_cap("abcdefghij", 4, "message body") == (
        "abcd\n[message body truncated; 6 chars omitted]"
    )


def test_text_of_exactly_the_limit_is_unchanged() -> None:
    assert text_cap("x" * 200, 200, "message subject") == "x" * 200


def test_short_text_is_unchanged() -> None:
    assert text_cap("hi", 8000, "message body") == "hi"


def test_cap_counts_characters_not_bytes() -> None:
    text = "é" * 5 + "🙂" * 5
    assert text_cap(text, 6, "message subject") == (
        "ééééé🙂\n[message subject truncated; 4 chars omitted]"
    )
    assert text_cap(text, 10, "message subject") == text


def test_negative_cap_is_rejected() -> None:
    with pytest.raises(ValueError, match="negative"):
        text_cap("abc", -1, "message body")


@pytest.mark.parametrize(
    ("value", "whole"),
    [
        (30, 30),
        (30.0, 30),
        (-2.0, -2),
        (0, 0),
        (1.5, None),
        (True, None),
        ("30", None),
        (None, None),
    ],
)
def test_whole_number_takes_ints_and_floats_with_nothing_after_the_point(
    value: object, whole: int | None
) -> None:
    assert whole_number(value) == whole
