"""Secret scrubbing of message subjects and bodies (DESIGN.md section 5).

Before a message is stored, every match of a secret pattern in its subject and body is
replaced by the literal ``[REDACTED]``; only then is the text capped (``text_cap``), so a
secret cut at the cap boundary can never survive as a fragment.

The sixteen built-in pattern families follow ``research/ai-memory-behaviour.md``
section 4, plus a seventeenth for this server's own ``aim_`` token keys. Operators add more under ``[sanitize]`` in the TOML file named by the
``AI_MEMORY_CONFIG`` setting::

    [sanitize]
    extra_patterns = ["ACME-[0-9]{6}"]
    allowlist = ["sk-test-public-demo-key-000000"]

Rules of the engine:

- Patterns run in a fixed order (built-ins, then ``extra_patterns`` in file order), each
  as one left-to-right pass over the text.
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
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from aimemory_site.lib.config_file import config_document, config_where

REDACTED = "[REDACTED]"

_MARKER = re.compile(re.escape(REDACTED))
_SECRET_GROUP = "secret"
# One redaction can give an earlier pattern a boundary it lacked (a marker where a
# letter was), so passes repeat until nothing changes. Each repeat removes at least one
# non-marker character, so this always converges; the bound only caps the work an
# adversarial text or pattern could force. Real texts settle within two or three passes.
_MAX_PASSES = 4

# --- Built-in patterns ----------------------------------------------------------------
#
# Every quantifier over an open-ended character class is possessive (``*+``, ``++``,
# ``{n,}+``) or stopped by a class it cannot consume, and every pattern that starts with
# a class run has a lookbehind so it can only start where that run starts. Together this
# keeps each pattern linear in the text length (no catastrophic backtracking).

# 11. PEM private-key blocks, matched first so the whole block goes as one unit before
# line-oriented patterns could chop it up. The body may be plain lines, JSON-escaped
# ("\n" as two characters), indented or quoted with ">"; encrypted PEM adds
# "Name: value" header lines. END is optional so a truncated paste still loses its key
# material; the body class has no "-", so a missing END stops at the next dash instead
# of scanning the rest of the text again for every BEGIN.
_PEM_LABEL = r"-----{edge}[A-Z0-9 ]{{0,40}}PRIVATE KEY(?: BLOCK)?-----"
PEM_PRIVATE_KEY = re.compile(
    _PEM_LABEL.format(edge="BEGIN")
    + r"(?:\s*+[A-Za-z][A-Za-z0-9-]*+:[^\r\n]*+)*+"
    + r"[A-Za-z0-9+/=\s\\>#]*+"
    + r"(?:"
    + _PEM_LABEL.format(edge="END")
    + r")?+"
)

# 10. JWTs: two base64url segments that both decode to a JSON object ("eyJ" is "{\"")
# and a signature, which is empty for unsigned tokens.
JWT = re.compile(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}+\.eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]*+")

# 2. OpenAI-style keys (sk-..., sk-proj-..., also Anthropic's sk-ant-...) and Stripe
# secret/restricted keys. Real keys run 40-200 characters; 20 keeps words such as
# "sk-learn" while any real key clears it easily.
API_SECRET_KEY = re.compile(
    r"(?<![A-Za-z0-9_-])sk-[A-Za-z0-9_-]{20,}+"
    r"|(?<![A-Za-z0-9_])[rs]k_(?:live|test)_[A-Za-z0-9]{16,}+"
)

# 3. GitHub tokens. Classic ones carry exactly 36 characters after the prefix; 30+
# tolerates older or future lengths. Fine-grained PATs are 82 characters long.
GITHUB_TOKEN = re.compile(
    r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{30,}+|github_pat_[A-Za-z0-9_]{22,}+)"
)

# 4. AWS access key ids: the format is fixed, so exactly 16 and no longer run.
AWS_ACCESS_KEY_ID = re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])")

# 5. Google API keys (fixed length 39) and OAuth refresh tokens ("1//" then ~100
# characters; 30 keeps Python floor divisions such as "1//n" out).
GOOGLE_KEY = re.compile(
    r"(?<![A-Za-z0-9_-])AIza[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])"
    r"|(?<![A-Za-z0-9/])1//[A-Za-z0-9_-]{30,}+"
)

# 6. Facebook / Meta access tokens: "EAA" plus well over 100 characters in practice.
META_TOKEN = re.compile(r"(?<![A-Za-z0-9])EAA[A-Za-z0-9]{32,}+")

# 7. Telegram bot tokens: an 8-10 digit bot id, a colon and a secret of 35 characters
# (Telegram's own documentation example has 34, hence 30+). API URLs write them right
# after "/bot", so that prefix counts as a boundary.
TELEGRAM_BOT_TOKEN = re.compile(r"(?:(?<=bot)|(?<![A-Za-z0-9_:]))[0-9]{8,10}+:[A-Za-z0-9_-]{30,}+")

# 8. "pit-" followed by a UUID.
PIT_TOKEN = re.compile(
    r"(?<![A-Za-z0-9_-])pit-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}"
    r"-[0-9a-fA-F]{12}(?![A-Za-z0-9])"
)

# 9. Slack tokens (bot, user, app-level, ...). Real ones are 40+ characters; 10 keeps
# a bare "xoxb-token" placeholder.
SLACK_TOKEN = re.compile(r"(?<![A-Za-z0-9_-])(?:xox[abprs]|xapp)-[A-Za-z0-9-]{10,}+")

# 17. This server's own API token keys: "aim_" and 43 URL-safe characters. A key
# pasted into a message would hand the recipient the sender's access.
AI_MEMORY_TOKEN = re.compile(r"(?<![A-Za-z0-9_-])aim_[A-Za-z0-9_-]{32,}+")

# 1. "Bearer <token>": RFC 6750 token characters; 16+ keeps prose ("the bearer of
# bad news") and placeholders, while real tokens are far longer. The word stays.
BEARER_TOKEN = re.compile(
    r"(?<![A-Za-z0-9_-])bearer[ \t]++(?P<secret>[A-Za-z0-9._~+/-]{16,}+=*+)",
    re.IGNORECASE,
)

# 12. Credentials inside URLs: "user:password" before "@" is redacted, the scheme and
# host stay. The password may itself contain "@" (the last "@" before the path wins, as
# in browsers); a user name alone ("ssh://git@host") is no secret and is kept.
URL_CREDENTIALS = re.compile(
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,31}+://"
    r"(?P<secret>[^\s/?#@:]*+:[^\s/?#]*)@"
)

# 13. Auth-bearing header lines, in HTTP dumps, curl -H arguments, JSON and YAML.
# The value is the first run of 8+ non-space characters after an optional scheme word,
# plus any further space-separated "name=value" parts (Cookie, Digest, AWS SigV4), so
# prose such as "Authorization: see section 8" loses one word at most. Inside quotes
# the value stops at the closing quote; bare, a double quote is part of it (Digest).
# "Private-Token" is GitLab's header. Allowing "_" for "-" also catches lower-case
# config keys such as "api_key:", "access_token:" or "private_key:" in YAML and JSON.
_HEADER_NAMES = (
    r"(?:proxy-)?authorization"
    r"|(?:x-)?(?:api|auth|access|session|vault|amz-security|goog-api|private)[-_]?(?:key|token)"
    r"|(?:set-)?cookie"
)
_HEADER_QUOTED_RUN = r"[^\s\"'`&]"
_HEADER_BARE_RUN = r"[^\s'`&]"
_HEADER_QUOTED_PART = r"[^\s\"'`&=]*+=[^\s\"'`&]*+"
_HEADER_BARE_PART = r"[^\s'`&=]*+=[^\s'`&]*+"
AUTH_HEADER = re.compile(
    # The leading letter test is only a fast reject for the many positions that cannot
    # start a header name; the lookbehinds are the real boundary.
    r"(?=[a-z])(?:(?<=(?P<name_quote>[\"']))|(?<![A-Za-z0-9_\"'-]))"
    r"(?:" + _HEADER_NAMES + r")"
    r"[\"']?+[ \t]*+:[ \t]*+"
    r"(?P<value_quote>[\"'])?+"
    r"(?:(?:bearer|basic|token|digest|negotiate|ntlm|apikey)[ \t]++)?+"
    r"(?P<secret>"
    rf"(?(name_quote){_HEADER_QUOTED_RUN}{{8,}}+"
    rf"|(?(value_quote){_HEADER_QUOTED_RUN}{{8,}}+|{_HEADER_BARE_RUN}{{8,}}+))"
    rf"(?:[ \t]++(?(name_quote){_HEADER_QUOTED_PART}"
    rf"|(?(value_quote){_HEADER_QUOTED_PART}|{_HEADER_BARE_PART})))*+"
    r")",
    re.IGNORECASE,
)

# 14 and 15 share the assignment syntax: NAME, an optional closing quote (JSON keys),
# "=" or ":" (not "==" or "::"), then a quoted value (its content is redacted, quotes
# stay) or a bare value up to whitespace or a quote. A value never continues onto the
# next line.
_ASSIGNED_VALUE = (
    r"(?![A-Za-z0-9_])[\"']?+[ \t]*+[:=](?![:=])[ \t]*+"
    r"(?P<quote>[\"'])?+"
    r"(?P<secret>(?(quote)(?:(?!(?P=quote))[^\r\n])++|[^\s\"'`]++))"
)

# 14. Well-known provider variables, any case (also "openai_api_key = ..." in code),
# including names the generic rule misses (PGPASSWORD, MYSQL_PWD) and this server's own
# tokens.
_PROVIDER_NAMES = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GROQ_API_KEY",
    "MISTRAL_API_KEY",
    "COHERE_API_KEY",
    "DEEPSEEK_API_KEY",
    "XAI_API_KEY",
    "OPENROUTER_API_KEY",
    "TOGETHER_API_KEY",
    "PERPLEXITY_API_KEY",
    "FIREWORKS_API_KEY",
    "REPLICATE_API_TOKEN",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "HUGGINGFACEHUB_API_TOKEN",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GITLAB_TOKEN",
    "NPM_TOKEN",
    "PYPI_TOKEN",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "SLACK_BOT_TOKEN",
    "STRIPE_SECRET_KEY",
    "PGPASSWORD",
    "MYSQL_PWD",
    "AI_MEMORY_ROOT_TOKEN",
    "AI_MEMORY_AUTH_TOKEN",
)
PROVIDER_ENV_ASSIGNMENT = re.compile(
    r"(?=[a-z])(?<![A-Za-z0-9_])(?:" + "|".join(_PROVIDER_NAMES) + r")" + _ASSIGNED_VALUE,
    re.IGNORECASE,
)

# 15. Generic assignments to UPPER_SNAKE names (the environment-variable convention)
# ending in a secret-bearing suffix. Upper case only, so code such as
# "primary_key=True" or "sort_key=len" is kept; "MONKEY" lacks the underscore.
# "_PRIVATE_KEY" is covered by "_KEY".
SECRET_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9_])[A-Z][A-Z0-9_]*(?:_KEY|_TOKEN|_SECRET|_PASSWORD|_CREDENTIALS?)"
    + _ASSIGNED_VALUE
)

# 16. Paths into credential directories. A path is a run of characters up to
# whitespace, quotes, brackets, ":" or "="; the directory must start the run or follow a
# separator and be followed by something inside it, so "~/.ssh" alone or ".sshd" stay.
# Stopping at ":" leaves "host:" of "host:~/.ssh/x" and "C:" of Windows paths readable.
# A path never ends in ".", "?" or "!", so a sentence's closing punctuation stays.
_PATH_CHAR = r"[^\s\"'`<>|;,()\[\]{}:=]"
_PATH_LAST_CHAR = r"[^\s\"'`<>|;,()\[\]{}:=.?!]"
CREDENTIAL_PATH = re.compile(
    rf"(?<!{_PATH_CHAR})"
    rf"(?:{_PATH_CHAR}*?[/\\])?\.(?:ssh|aws|kube|gnupg|config[/\\]gcloud)[/\\]"
    rf"{_PATH_CHAR}*{_PATH_LAST_CHAR}"
)

BUILTIN_PATTERNS: tuple[re.Pattern[str], ...] = (
    # Whole blocks first, then self-identifying token formats (they need no context),
    # then the context rules, which then see "[REDACTED]" as the value and leave it.
    PEM_PRIVATE_KEY,
    JWT,
    API_SECRET_KEY,
    GITHUB_TOKEN,
    AWS_ACCESS_KEY_ID,
    GOOGLE_KEY,
    META_TOKEN,
    TELEGRAM_BOT_TOKEN,
    PIT_TOKEN,
    SLACK_TOKEN,
    AI_MEMORY_TOKEN,
    BEARER_TOKEN,
    URL_CREDENTIALS,
    AUTH_HEADER,
    PROVIDER_ENV_ASSIGNMENT,
    SECRET_ASSIGNMENT,
    CREDENTIAL_PATH,
)

# Fast gates: a literal that every match of the pattern contains, found by a search that
# runs far faster than the pattern itself, so the common message with no secret costs a
# few substring scans instead of seventeen full regex passes. A gate uses the pattern's own
# case flags, so it agrees with the pattern on what counts as the same letter.
# Patterns without a useful literal (Telegram's is ":") have no gate and always run.
PREFILTERS: dict[re.Pattern[str], re.Pattern[str]] = {
    PEM_PRIVATE_KEY: re.compile(r"PRIVATE KEY"),
    JWT: re.compile(r"eyJ"),
    API_SECRET_KEY: re.compile(r"sk-|k_live_|k_test_"),
    GITHUB_TOKEN: re.compile(r"gh[pousr]_|github_pat_"),
    AWS_ACCESS_KEY_ID: re.compile(r"A[KS]IA"),
    GOOGLE_KEY: re.compile(r"AIza|1//"),
    META_TOKEN: re.compile(r"EAA"),
    PIT_TOKEN: re.compile(r"pit-"),
    SLACK_TOKEN: re.compile(r"xox|xapp-"),
    AI_MEMORY_TOKEN: re.compile(r"aim_"),
    BEARER_TOKEN: re.compile(r"bearer", re.IGNORECASE),
    URL_CREDENTIALS: re.compile(r"://"),
    AUTH_HEADER: re.compile(r"authorization|key|token|cookie", re.IGNORECASE),
    PROVIDER_ENV_ASSIGNMENT: re.compile(r"key|token|password|pwd", re.IGNORECASE),
    SECRET_ASSIGNMENT: re.compile(r"_(?:KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)"),
    CREDENTIAL_PATH: re.compile(r"\.(?:ssh|aws|kube|gnupg)|gcloud"),
}


# --- Engine ---------------------------------------------------------------------------


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

    def scrub(self, text: str) -> str:
        """Return ``text`` with every secret match replaced by ``[REDACTED]``."""
        for _ in range(_MAX_PASSES):
            scrubbed = text
            for pattern in self.patterns:
                scrubbed = self._apply(pattern, scrubbed)
            if scrubbed == text:
                break
            text = scrubbed
        return text

    def _apply(self, pattern: re.Pattern[str], text: str) -> str:
        """One pass of one pattern over the text."""
        gate = PREFILTERS.get(pattern)
        if gate is not None and gate.search(text) is None:
            return text
        markers = [m.span() for m in _MARKER.finditer(text)] if REDACTED in text else []
        marker_starts = [start for start, _ in markers]
        spans: list[tuple[int, int]] = []
        for match in pattern.finditer(text):
            start, end = _redaction_span(match)
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
