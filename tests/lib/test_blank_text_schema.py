"""The documented "Must hold a visible character" pattern agrees with the domain's check.

Schema-driven clients and fuzzers (schemathesis) read the pattern of NonBlankText; the
domain refuses a blank body in text_clean. For text in the Basic Multilingual Plane the
two must agree, whatever the scrubber counts as invisible.
"""

from __future__ import annotations

import re
import string
import typing

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aimemory_site.lib.api import NonBlankText
from aimemory_site.lib.errors import BadRequest
from aimemory_site.lib.scrubbing import INVISIBLE_CHARACTERS, text_clean

(_FIELD,) = typing.get_args(NonBlankText)[1:]
PATTERN = re.compile(_FIELD.json_schema_extra["pattern"])
BMP_INVISIBLE = [c for c in INVISIBLE_CHARACTERS if ord(c) <= 0xFFFF]


def _refused(text: str) -> bool:
    try:
        text_clean(text, cap=8000, label="message body")
    except BadRequest:
        return True
    return False


@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@given(
    text=st.text(
        st.sampled_from([*BMP_INVISIBLE, " ", "\t", "\n", "\u3000", *string.hexdigits, "é"]),
        min_size=1,
        max_size=12,
    )
)
def test_pattern_says_blank_exactly_when_the_domain_refuses(text: str) -> None:
    assert (PATTERN.search(text) is None) == _refused(text)


@pytest.mark.parametrize("text", ["0", "f", "fade", "e01ef"])
def test_hex_digits_are_visible_to_the_pattern(text: str) -> None:
    assert PATTERN.search(text)
