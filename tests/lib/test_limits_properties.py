"""Properties of the caps and the name rule, over generated text (hypothesis).

A capped body is never longer than the cap plus its one marker line, keeps the text's
start, and counts what it dropped; a subject is always one line within 200 characters,
ending in "…" when cut; both caps leave what they produced unchanged.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from aimemory_site.lib.api import NAME_DOCUMENTED_PATTERN
from aimemory_site.lib.limits import (
    LIST_LIMIT_MAX,
    LIST_LIMIT_MIN,
    SCRUB_WINDOW_CHARS,
    limit_clamp,
    text_cap,
    truncation_marker,
)
from aimemory_site.lib.names import NAME_PATTERN, name_from_directory, name_is_valid
from aimemory_site.lib.scrubbing import text_clean
from messaging.limits import SUBJECT_MAX_CHARS
from messaging.services import subject_clean

# Bounded and reproducible: the same examples every run, and no example database
# written into the checkout.
PROPERTY = settings(max_examples=100, derandomize=True, database=None, deadline=None)

LABELS = st.sampled_from(["message body", "handoff body", "page body", "message subject"])

# Text with what makes a subject more than one line: every character str.splitlines
# breaks at, and other control characters.
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
multiline_text = st.text(
    st.characters(codec="utf-8") | st.sampled_from(LINE_BREAKS + "\t\x00\x7f\x9b"), max_size=400
)


@PROPERTY
@given(text=st.text(max_size=300), limit=st.integers(0, 320), label=LABELS)
def test_a_capped_text_is_never_longer_than_the_cap_plus_its_marker_line(
    text: str, limit: int, label: str
) -> None:
    capped = text_cap(text, limit, label)
    if len(text) <= limit:
        assert capped == text
        return
    marker = truncation_marker(label, len(text) - limit)
    assert capped == text[:limit] + marker
    assert len(capped) == limit + len(marker)
    # The marker is one line of its own, after a line break, counting what was dropped.
    assert marker.startswith("\n") and len(marker.splitlines()) == 2
    assert re.fullmatch(rf"\n\[{label} truncated; {len(text) - limit} chars omitted\]", marker)


@PROPERTY
@given(text=st.text(max_size=300), limit=st.integers(0, 320), label=LABELS)
def test_the_cap_leaves_its_own_kept_text_unchanged(text: str, limit: int, label: str) -> None:
    kept = text_cap(text, limit, label)[:limit]
    assert text_cap(kept, limit, label) == kept


@PROPERTY
@given(
    chunk=st.text(min_size=1, max_size=40).filter(str.strip),
    repeats=st.integers(1, 2 * SCRUB_WINDOW_CHARS // 40),
    cap=st.integers(1, 9000),
)
def test_a_cleaned_body_is_never_longer_than_the_cap_plus_its_marker_line(
    chunk: str, repeats: int, cap: int
) -> None:
    # Long texts take the scrub-window path as well as the plain one.
    clean = text_clean(chunk * repeats, cap=cap, label="message body")
    marker = truncation_marker("message body", clean.omitted) if clean.omitted else ""
    assert clean.text.endswith(marker)
    assert len(clean.text) <= cap + len(marker)


@settings(PROPERTY, max_examples=300)
@given(subject=multiline_text.filter(lambda text: "\x00" not in text))
def test_a_subject_is_always_one_line_within_200_chars(subject: str) -> None:
    cleaned = subject_clean(subject).text
    assert len(cleaned) <= SUBJECT_MAX_CHARS
    assert len(cleaned.splitlines()) <= 1
    assert cleaned == cleaned.strip()


@PROPERTY
@given(words=st.lists(st.sampled_from(["export", "NDJSON", "endpoint", "naïve", "東京", "42"])))
def test_a_long_subject_is_cut_with_an_ellipsis(words: list[str]) -> None:
    subject = " ".join(words)
    cleaned = subject_clean(subject).text
    if len(subject) <= SUBJECT_MAX_CHARS:
        assert cleaned == subject
    else:
        assert cleaned.endswith("…") and len(cleaned) <= SUBJECT_MAX_CHARS
        assert subject.startswith(cleaned.removesuffix("…"))


@settings(PROPERTY, max_examples=300)
@given(subject=multiline_text.filter(lambda text: "\x00" not in text))
def test_cleaning_a_subject_twice_changes_nothing(subject: str) -> None:
    once = subject_clean(subject).text
    assert subject_clean(once).text == once


@PROPERTY
@given(
    name=st.sampled_from(["password:", "db_password=", "OPENAI_API_KEY=", "Authorization:"]),
    line_break=st.sampled_from(["\n", "\r\n", "\u2028"]),
    secret=st.text(st.sampled_from("0123456789ABCDFGHJKMNQRUVXYZ"), min_size=8, max_size=20),
)
def test_a_credential_split_over_two_lines_is_scrubbed_from_a_subject(
    name: str, line_break: str, secret: str
) -> None:
    cleaned = subject_clean(f"{name}{line_break}9{secret}").text
    assert f"9{secret}" not in cleaned


@PROPERTY
@given(value=st.integers() | st.none())
def test_a_list_limit_is_always_clamped_into_its_range(value: int | None) -> None:
    used = limit_clamp(value)
    assert LIST_LIMIT_MIN <= used <= LIST_LIMIT_MAX
    if value is not None and LIST_LIMIT_MIN <= value <= LIST_LIMIT_MAX:
        assert used == value
    assert limit_clamp(used) == used


@settings(PROPERTY, max_examples=300)
@given(value=st.text(max_size=120) | st.from_regex(NAME_PATTERN, fullmatch=True))
def test_the_documented_name_pattern_is_the_name_rule(value: str) -> None:
    # The OpenAPI document states the rule without the lookahead NAME_PATTERN uses.
    documented = re.fullmatch(NAME_DOCUMENTED_PATTERN, value) is not None
    assert documented == name_is_valid(value)


@PROPERTY
@given(directory=st.text(max_size=150))
def test_a_name_made_from_a_directory_is_valid_or_empty(directory: str) -> None:
    name = name_from_directory(directory)
    assert name == "" or name_is_valid(name)
