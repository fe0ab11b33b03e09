"""Text no request may carry: NUL and lone surrogates (DESIGN.md section 7, Requests).

PostgreSQL text cannot hold NUL, and a lone surrogate cannot be encoded as UTF-8, so
either would fail deep inside a write; refusing them where requests come in keeps every
surface's answer a clear 400 ``invalid_text`` that changes nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

# NUL, and UTF-16 surrogate code points, which only ever appear unpaired in a Python str.
_FORBIDDEN = re.compile("[\x00\ud800-\udfff]")
# JSON can smuggle both as escapes ("\u0000", "\ud800"), besides a raw NUL byte or an
# encoded surrogate (not UTF-8). Only a body with such an escape needs a second parse:
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


def json_body_invalid(raw: bytes) -> bool:
    """Whether a JSON body carries a NUL or a lone surrogate in any string (or key).

    A body that is not JSON at all is not judged here: the parser of the surface answers
    it. Bytes that are not UTF-8 are invalid text.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        # An encoded surrogate is invalid text when it sits in otherwise valid JSON;
        # bytes that are no UTF-8 even so are the parser's to answer.
        try:
            text = raw.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            return False
    else:
        if "\x00" not in text and _SUSPECT_ESCAPE.search(text) is None:
            return False
    try:
        decoded = json.loads(text)
    except ValueError:
        return False
    return any(text_invalid(value) for value in _strings(decoded))
