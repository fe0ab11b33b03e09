"""Secret scrubbing of every text agents leave here: message subjects and bodies,
handoffs and pages (docs/reference.md#messages and docs/reference.md#the-on-start-block).

Before a text is stored, every match of a secret pattern in it is replaced by the
literal ``[REDACTED]``; only then is the text capped (``text_cap``), so a secret cut at
the cap boundary can never survive as a fragment. It lives in the library, below the
apps, because projects (handoffs, pages) and messaging both scrub.

This module is the engine and its configuration. The built-in patterns, their comments,
their order (``BUILTIN_PATTERNS``) and their gates (``PREFILTERS``) live in
``aimemory_site.lib.secret_patterns``, which is plain ``re``; they are re-exported
here. Operators
add more under ``[sanitize]`` in the TOML file named by the ``AI_MEMORY_CONFIG``
setting::

    [sanitize]
    extra_patterns = ["ACME-[0-9]{6}"]
    allowlist = ["sk-test-public-demo-key-000000"]

Rules of the engine:

- Invisible characters are removed first (``INVISIBLE_CHARACTERS``): the format
  characters that render as nothing (Unicode category Cf: zero-width space, non-joiner
  and joiner, the directional marks, embeddings, overrides and isolates, word joiner and
  the invisible operators, the byte-order mark, the soft hyphen, the Mongolian vowel
  separator, the interlinear annotation controls and the tag characters U+E0000-U+E007F)
  plus the other default-ignorable ones that select nothing: the combining grapheme
  joiner (U+034F) and the Khmer inherent vowels (U+17B4, U+17B5). One of them inside a
  token ("ghp_abc<U+200B>def") would otherwise split it into two harmless-looking halves.
  They are stripped from the whole text, not only from secrets: they carry no meaning in
  a request to an agent (the cost is cosmetic: emoji joined by U+200D show as their
  separate parts, a subdivision flag as a plain black flag, in Persian or Indic text a
  non-joiner only changes how letters join, and explicit direction controls no longer
  reorder mixed-direction text), and invisible text is itself a way to hide instructions
  (tag characters spell ASCII that models read and people do not see).
- Format characters that render visibly are kept: the signs that span the digits after
  them (Arabic number and end-of-ayah signs, U+0600-U+0605, U+06DD, U+0890, U+0891,
  U+08E2, Syriac U+070F, Kaithi U+110BD, U+110CD) and the controls that lay out
  Egyptian hieroglyphs, Duployan shorthand and musical beams.
- Variation selectors (U+FE00-U+FE0F, U+E0100-U+E01EF) and Mongolian free variation
  selectors (U+180B-U+180D, U+180F) choose how the character before them looks
  ("\u2764\ufe0f", an ideographic variant of a name), so they are kept after a non-ASCII
  character and in a keycap ("1\ufe0f\u20e3"); after ASCII, where they select nothing,
  they are removed like the rest.
- Stripping, rather than scrubbing a normalised copy and mapping spans back, keeps the
  engine simple and leaves none of them in the output, so ``scrub(scrub(x)) ==
  scrub(x)`` holds as before. Disguises that must stay readable (a token split over two
  lines, written with URL escapes or HTML entities) are patterns instead.
- Patterns run in a fixed order (built-ins, then ``extra_patterns`` in file order), each
  as one left-to-right pass over the text. A built-in may come with a check its matches
  must pass (``MATCH_CHECKS``), for a rule no regex can state; the check answers the
  span to redact, which may end before the match does.
- A pattern with a named group ``secret`` redacts only that group, so context such as
  a header name, a variable name or a URL's scheme and host stays readable; any other
  pattern redacts its whole match. Operators may use ``(?P<secret>...)`` too.
- Allowlist: a match is kept when the text it would redact is *exactly equal* to an
  allowlist entry. Entries are literal strings, not regexes, so one entry can never
  switch off a whole pattern family.
- A ``[REDACTED]`` marker already in the text is atomic: a match that cuts into a
  marker, or holds nothing but markers, is ignored; a longer match that holds whole
  markers is redacted as a whole.
- Scrubbing is idempotent: ``scrub(scrub(x)) == scrub(x)`` (for operator patterns too,
  unless one is written to match the marker text itself plus more).
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from aimemory_site.lib.config_file import config_document, config_where
from aimemory_site.lib.errors import BadRequest, Code
from aimemory_site.lib.limits import (
    SCRUB_MARGIN_CHARS,
    SCRUB_WINDOW_CHARS,
    text_cap,
    truncation_marker,
)
from aimemory_site.lib.secret_patterns import (
    BUILTIN_PATTERNS,
    MATCH_CHECKS,
    PREFILTERS,
    REDACTED,
    lines_joined,
)

__all__ = [
    "BUILTIN_PATTERNS",
    "INVISIBLE_CHARACTERS",
    "PREFILTERS",
    "REDACTED",
    "Scrubber",
    "invisible_removed",
    "scrubber_builtin",
    "scrubber_configured",
]

_MARKER = re.compile(re.escape(REDACTED))
_SECRET_GROUP = "secret"
# One redaction can give an earlier pattern a boundary it lacked (a marker where a
# letter was), so passes repeat until nothing changes. Each repeat removes at least one
# non-marker character, so this always converges; the bound only caps the work an
# adversarial text or pattern could force. Real texts settle within two or three passes.
_MAX_PASSES = 4


def _characters(*ranges: tuple[int, int]) -> str:
    return "".join(chr(code) for first, last in ranges for code in range(first, last + 1))


# Characters that render as nothing and are removed before any pattern runs (see the
# module docstring). Spelt out rather than read from ``unicodedata`` so that what is
# removed does not change with the Python version's Unicode tables.
_ALWAYS_INVISIBLE = _characters(
    (0x00AD, 0x00AD),  # soft hyphen
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x061C, 0x061C),  # Arabic letter mark
    (0x17B4, 0x17B5),  # Khmer inherent vowels
    (0x180E, 0x180E),  # Mongolian vowel separator
    (0x200B, 0x200F),  # zero-width space, non-joiner, joiner; directional marks
    (0x202A, 0x202E),  # directional embeddings and overrides
    (0x2060, 0x2064),  # word joiner, invisible operators
    (0x2066, 0x206F),  # directional isolates, deprecated format characters
    (0xFEFF, 0xFEFF),  # byte-order mark, zero-width no-break space
    (0xFFF9, 0xFFFB),  # interlinear annotation controls
    (0xE0000, 0xE007F),  # tag characters
)
# Selectors: invisible on their own, they choose the look of the character before them.
_SELECTOR_RANGES = ((0x180B, 0x180D), (0x180F, 0x180F), (0xFE00, 0xFE0F), (0xE0100, 0xE01EF))
_SELECTORS = _characters(*_SELECTOR_RANGES)
# Every character that is invisible on its own, for telling a blank text from one with
# something to read; the scrubber removes all of the first kind and selectors after ASCII.
INVISIBLE_CHARACTERS = _ALWAYS_INVISIBLE + _SELECTORS
_INVISIBLE_DELETE = str.maketrans(dict.fromkeys(_ALWAYS_INVISIBLE))
_BLANK_DELETE = str.maketrans(dict.fromkeys(INVISIBLE_CHARACTERS))
_SELECTOR_CLASS = "[" + "".join(f"{chr(a)}-{chr(b)}" for a, b in _SELECTOR_RANGES) + "]"
_ANY_SELECTOR = re.compile(_SELECTOR_CLASS)
# A run of selectors at the start or after an ASCII character, unless it makes a keycap.
_UNSELECTING_SELECTORS = re.compile(r"(?<![^\x00-\x7f])" + _SELECTOR_CLASS + r"++(?!\u20e3)")


def invisible_removed(text: str) -> str:
    """``text`` without the invisible characters the scrubber removes before matching."""
    if text.isascii():
        # The usual text, and none of them is ASCII: one C-speed scan instead of two.
        return text
    text = text.translate(_INVISIBLE_DELETE)
    if _ANY_SELECTOR.search(text):
        text = _UNSELECTING_SELECTORS.sub("", text)
    return text


# --- Engine ---------------------------------------------------------------------------

_MatchCheck = Callable[[re.Match[str]], tuple[int, int] | None]
# A pattern, its gate (literals, case-folded, needs a line break, looked for with the
# line breaks taken out) and its check.
_Plan = tuple[re.Pattern[str], tuple[str, ...], bool, bool, bool, _MatchCheck | None]


def _redaction_span(match: re.Match[str]) -> tuple[int, int]:
    """The part of a match to redact: its ``secret`` group if it took part, else all."""
    if _SECRET_GROUP in match.re.groupindex:
        start, end = match.span(_SECRET_GROUP)
        if start != -1:
            return start, end
    return match.span()


def _spares_markers(
    start: int, end: int, markers: list[tuple[int, int]], marker_starts: list[int]
) -> bool:
    """Whether a span may be redacted without harming existing markers.

    It may not cut into a marker (that would mangle it, and a pattern that reads marker
    letters would then eat a little more on every pass) and it may not consist of
    markers only (nothing left to hide). Whole markers inside a longer span are fine:
    "hunter2@[REDACTED]" as a password value must still go as a whole.
    """
    i = bisect.bisect_right(marker_starts, start) - 1
    if i < 0 or markers[i][1] <= start:
        i += 1
    covered = 0
    while i < len(markers) and markers[i][0] < end:
        m_start, m_end = markers[i]
        if m_start < start or m_end > end:
            return False
        covered += m_end - m_start
        i += 1
    return covered < end - start


@dataclass(frozen=True, slots=True)
class Scrubber:
    """An immutable list of secret patterns plus an allowlist of exact strings to keep."""

    patterns: tuple[re.Pattern[str], ...]
    allowlist: frozenset[str] = frozenset()
    # Each pattern with its gate (``_Plan``; no literals: no gate) and the check its
    # matches must pass (None: none), derived once from ``patterns``.
    _gated: tuple[_Plan, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        gated: list[_Plan] = []
        for pattern in self.patterns:
            check = MATCH_CHECKS.get(pattern)
            gate = PREFILTERS.get(pattern)
            if gate is None:
                gated.append((pattern, (), False, False, False, check))
                continue
            plan = (gate.literals, gate.ignore_case, gate.line_break, gate.joined)
            gated.append((pattern, *plan, check))
        object.__setattr__(self, "_gated", tuple(gated))  # frozen: set once, here

    def scrub(self, text: str) -> str:
        """Return ``text`` with every secret match replaced by ``[REDACTED]``.

        Invisible characters are removed first (see the module docstring).
        """
        text = invisible_removed(text)
        for _ in range(_MAX_PASSES):
            scrubbed = text
            folded = text.casefold()
            # Redactions never add a line break, so the first answer holds for the pass.
            has_break = "\n" in text
            joined: str | None = None  # ``scrubbed`` with its line breaks out, once asked
            for pattern, literals, ignore_case, line_break, in_joined, check in self._gated:
                # The gate, inline: it runs forty times per text, and for the usual
                # text, with no secret, it is all the scrubbing that happens.
                if line_break and not has_break:
                    continue
                if literals:
                    if in_joined:
                        if joined is None:
                            joined = lines_joined(scrubbed)
                        haystack = joined
                    else:
                        haystack = folded if ignore_case else scrubbed
                    for literal in literals:
                        if literal in haystack:
                            break
                    else:
                        continue
                changed = self._apply(pattern, scrubbed, check)
                if changed is not scrubbed:
                    scrubbed, folded, joined = changed, changed.casefold(), None
            if scrubbed == text:
                break
            text = scrubbed
        return text

    def scrub_counted(self, text: str) -> tuple[str, int]:
        """``scrub(text)`` and how many secrets it redacted (markers it added)."""
        scrubbed = self.scrub(text)
        return scrubbed, max(0, scrubbed.count(REDACTED) - text.count(REDACTED))

    def _apply(self, pattern: re.Pattern[str], text: str, check: _MatchCheck | None) -> str:
        """One pass of one pattern over the text, which its gate (if any) admitted."""
        markers = [m.span() for m in _MARKER.finditer(text)] if REDACTED in text else []
        marker_starts = [start for start, _ in markers]
        spans: list[tuple[int, int]] = []
        for match in pattern.finditer(text):
            if check is None:
                start, end = _redaction_span(match)
            else:
                span = check(match)
                if span is None:
                    continue
                start, end = span
            if start == end or text[start:end] in self.allowlist:
                continue
            if markers and not _spares_markers(start, end, markers, marker_starts):
                continue
            spans.append((start, end))
        if not spans:
            return text
        pieces: list[str] = []
        position = 0
        for start, end in spans:
            pieces += (text[position:start], REDACTED)
            position = end
        pieces.append(text[position:])
        return "".join(pieces)


@functools.cache
def scrubber_builtin() -> Scrubber:
    """The scrubber with only the built-in patterns and no allowlist."""
    return Scrubber(BUILTIN_PATTERNS)


def scrubber_configured() -> Scrubber:
    """Built-ins plus ``[sanitize]`` from ``settings.AI_MEMORY_CONFIG`` (empty = none).

    Built once per config path and process; a changed file needs a restart. Raises
    ``ImproperlyConfigured`` for an unreadable file, bad TOML or a bad pattern.
    """
    return _scrubber_for_config(settings.AI_MEMORY_CONFIG)


@functools.lru_cache(maxsize=8)
def _scrubber_for_config(path: str) -> Scrubber:
    if not path:
        return scrubber_builtin()
    extra_patterns, allowlist = _read_sanitize_table(path)
    return Scrubber(BUILTIN_PATTERNS + extra_patterns, allowlist)


def _read_sanitize_table(path: str) -> tuple[tuple[re.Pattern[str], ...], frozenset[str]]:
    """Parse and validate ``[sanitize]``; anything unexpected is an error, never ignored."""
    where = config_where(path)
    document = config_document(path)

    table = document.get("sanitize", {})
    if not isinstance(table, dict):
        raise ImproperlyConfigured(f"{where}: [sanitize] must be a table")
    unknown = sorted(set(table) - {"extra_patterns", "allowlist"})
    if unknown:
        # A misspelt key would otherwise silently scrub less than the operator meant.
        raise ImproperlyConfigured(
            f"{where}: unknown key(s) in [sanitize]: {', '.join(unknown)}; "
            "expected extra_patterns and allowlist"
        )

    compiled: list[re.Pattern[str]] = []
    for index, source in enumerate(_string_list(table, "extra_patterns", where)):
        if not source:
            raise ImproperlyConfigured(f"{where}: [sanitize] extra_patterns[{index}] is empty")
        try:
            compiled.append(re.compile(source))
        except re.error as exc:
            raise ImproperlyConfigured(
                f"{where}: [sanitize] extra_patterns[{index}] {source!r} "
                f"is not a valid regular expression: {exc}"
            ) from exc
    allowlist = frozenset(_string_list(table, "allowlist", where))
    return tuple(compiled), allowlist


def _string_list(table: dict[str, Any], key: str, where: str) -> list[str]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ImproperlyConfigured(f"{where}: [sanitize] {key} must be a list of strings")
    return value


@dataclass(frozen=True)
class CleanText:
    """A text as it will be stored, with what scrubbing and the cap did to it."""

    text: str
    omitted: int = 0
    redactions: int = 0


def text_clean(text: str, *, cap: int, label: str) -> CleanText:
    """Scrub then cap ``text`` (``label`` names it in the truncation marker).

    Scrubbing first means a secret cut at the cap never leaks. A text far over the cap is
    scrubbed only in a window that can reach it (scrubbing costs about a second per MiB,
    and a request may carry 1 MiB), minus a margin at the window's end, where a secret
    cut by the window might not be recognised.

    A text that is blank once its invisible characters are gone raises BadRequest
    ``empty_body``: callers refuse a blank body before calling, but scrubbing removes
    those characters, and "\u200b" alone would otherwise be stored as an empty body.
    """
    if not text.translate(_BLANK_DELETE).strip():
        raise BadRequest(
            "body must not be empty: it holds only whitespace and invisible characters",
            code=Code.EMPTY_BODY,
        )
    scrubber = scrubber_configured()
    if len(text) <= SCRUB_WINDOW_CHARS:
        scrubbed, redactions = scrubber.scrub_counted(text)
        omitted = max(0, len(scrubbed) - cap)
        return CleanText(text_cap(scrubbed, cap, label), omitted, redactions)
    window, redactions = scrubber.scrub_counted(text[:SCRUB_WINDOW_CHARS])
    kept = window[: min(cap, len(window) - SCRUB_MARGIN_CHARS)]
    omitted = len(window) - len(kept) + len(text) - SCRUB_WINDOW_CHARS
    return CleanText(kept + truncation_marker(label, omitted), omitted, redactions)
