"""Text no request may carry: bodies, paths and queries that are not UTF-8, NUL and lone
surrogates.

PostgreSQL text cannot hold NUL, and a lone surrogate cannot be encoded as UTF-8, so
either would fail deep inside a write; JSON in UTF-16 or UTF-32, which Python's JSON
reader decodes from bytes unasked, would carry text past every check made on UTF-8.
Refusing all of them where requests come in keeps every surface's answer a clear 400
``invalid_text`` that changes nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

# NUL, and UTF-16 surrogate code points, which only ever appear unpaired in a Python str.
_FORBIDDEN = re.compile("[\x00\ud800-\udfff]")
# JSON can smuggle both as escapes ("\u0000", "\ud800"), besides a raw NUL byte or an
# encoded surrogate (not UTF-8). Only a body with such an escape needs a parse here:
# ordinary non-ASCII text ("\u00e9") never does, and a surrogate pair (an emoji) is
# told apart from a lone surrogate by the parse.
_SUSPECT_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


def text_invalid(value: str) -> bool:
    """Whether ``value`` holds a NUL or a lone surrogate."""
    return _FORBIDDEN.search(value) is not None


def _strings(value: Any) -> Iterable[str]:
    """Every string of a decoded JSON value, keys included."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            for key, inner in item.items():
                yield key
                stack.append(inner)
        elif isinstance(item, list):
            stack.extend(item)


HOSTILE_TEXT = (
    "the request holds a NUL character or a lone surrogate, which no text here may contain"
)
NOT_UTF8 = (
    "the request body is not UTF-8: send JSON encoded as UTF-8 (not UTF-16, UTF-32 or "
    "another encoding)"
)
NOT_UTF8_URL = "the path or the query is not UTF-8 once percent-decoded"
_UTF8_BOM = "\ufeff"


def json_body_problem(raw: bytes) -> str | None:
    """Why a request body is text no request may carry (``NOT_UTF8`` or
    ``HOSTILE_TEXT``), or None.

    The body must be UTF-8, which also rules out an encoded surrogate; a leading byte
    order mark is allowed, as JSON readers skip it. Then no string (or key) may hold a
    NUL or a lone surrogate, escaped or not. A UTF-8 body that is not JSON at all is not
    judged here: the parser of the surface answers it.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return NOT_UTF8
    if "\x00" in text:
        # UTF-16 or UTF-32 of ASCII text is valid UTF-8 full of NULs: tell it the way
        # the JSON reader would have decoded it, so the answer names the real mistake.
        return NOT_UTF8 if json.detect_encoding(raw) != "utf-8" else HOSTILE_TEXT
    if _SUSPECT_ESCAPE.search(text) is None:
        return None
    try:
        decoded = json.loads(text.removeprefix(_UTF8_BOM))
    except (ValueError, RecursionError):
        return None
    return HOSTILE_TEXT if any(text_invalid(value) for value in _strings(decoded)) else None
