"""The built-in secret patterns of the message scrubber (docs/reference.md#messages).

Pure ``re``, no Django: the engine that applies them and the ``[sanitize]``
configuration live in ``aimemory_site.lib.scrubbing``. The ``[REDACTED]`` marker is defined here
because family 27 must recognise it inside a value.

Families 1-16 follow ``research/ai-memory-behaviour.md`` section 4, 17 is this server's
own ``aim_`` token keys, and 18-30 close the gaps a security review found by planting
secrets in the formats real tools print (GitLab, npm, Hugging Face, SendGrid, Docker,
AWS secret keys and session tokens, Slack webhooks, Azure connection strings, password
assignments, ``mysql -p`` and ``docker login -p``), and 31-38 those a second review
found (Shopify, Twilio and Linear keys, ``curl -u``, tokens in URL query parameters, AWS
secret keys in prose, and known-prefix tokens split over two lines or disguised with URL
escapes or HTML entities). A third review widened 37 (a break anywhere in the token, its
prefix too, and many breaks) and added 39 (a credential's value on the line after its
name) and 40 (credentials wrapped in base64). Each pattern's comment names its source
format and why its boundaries are where they are.

``BUILTIN_PATTERNS`` is the order the engine runs them in; ``PREFILTERS`` maps a pattern
to a cheap gate that every text it finds a secret in passes; ``MATCH_CHECKS`` maps a
pattern to a test each of its matches must pass before it is redacted, which answers
the span to redact.
"""

from __future__ import annotations

import base64
import binascii
import functools
import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass

# The marker the engine puts in place of a secret. It lives here because some patterns
# must recognise it inside a value they take whole (family 27).
REDACTED = "[REDACTED]"
_MARKER_LITERAL = re.escape(REDACTED)
# A check of ``MATCH_CHECKS``: the span of a match to redact, or None to keep it.
_Check = Callable[[re.Match[str]], tuple[int, int] | None]

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
    # A backslash that continues the line is no value: the value is on the next line
    # (family 39).
    r"(?!\\\r?\n)"
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


# --- Families added after the security review ------------------------------------------
#
# 18-30 close gaps a review found by planting real-format secrets in messages. Patterns
# that need context on the same line (an AWS key id, a "mysql" or "docker login" command)
# reach it through a bounded gap: at most 120 characters, or at most 20 words. That costs
# a fixed number of steps per place the context occurs, so they stay linear too.

# 18. GitLab tokens: "glpat-" personal access tokens (20 characters after the prefix;
# newer "routable" ones are longer and carry "."-separated parts), plus the sibling
# prefixes GitLab documents for deploy ("gldt-"), runner ("glrt-"), pipeline trigger
# ("glptt-"), OAuth application ("gloas-"), CI job ("glcbt-"), feed ("glft-"), service
# account ("glsoat-"), incoming mail ("glimt-") and agent ("glagent-") tokens. Every dot
# part must hold a character, so a sentence's closing "." stays.
GITLAB_TOKEN = re.compile(
    r"(?<![A-Za-z0-9_-])gl(?:pat|dt|rt|ptt|oas|cbt|ft|soat|imt|agent)-[A-Za-z0-9_-]{20,}+"
    r"(?:\.[A-Za-z0-9_-]{1,64}+){0,4}+"
)

# 19. npm access tokens: "npm_" and 36 base62 characters (30 random plus a 6-character
# checksum), as "npm token create" prints them. npm's own environment variables
# ("npm_config_registry", "npm_package_version") break at their "_" and stay.
NPM_TOKEN = re.compile(r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36,}+")

# 20. Hugging Face user access tokens: "hf_" and 34 or more letters and digits (37 in
# practice). Library names ("hf_hub_download", "hf_transfer") break at the next "_".
HUGGING_FACE_TOKEN = re.compile(r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{34,}+")

# 21. SendGrid API keys: "SG.", a 22-character key id, "." and a 43-character secret,
# both base64url. The format is fixed, so both lengths are exact.
SENDGRID_KEY = re.compile(
    r"(?<![A-Za-z0-9_.-])SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])"
)

# 22. Docker Hub personal and organisation access tokens: "dckr_pat_" / "dckr_oat_" and
# 27 or more base64url characters, as "docker login" is told to use them.
DOCKER_TOKEN = re.compile(r"(?<![A-Za-z0-9_])dckr_(?:pat|oat)_[A-Za-z0-9_-]{27,}+")

# 23. AWS secret access keys printed without a variable name: a 40-character base64 run
# on the same line as an access key id, either after it (IAM's accessKeys.csv,
# "aws iam create-access-key --output text", "aws sts ... --output text") or before it.
# A bare 40-character run is far too common to redact on its own (git SHAs, base64
# digests, paths), so the id is required, within 120 characters. Pure hex runs (SHAs) are
# excluded outright, and a key must mix upper and lower case, as any random base64 key
# does. This runs before family 4, which would otherwise turn the id into "[REDACTED]"
# and take the context away; only the key is redacted here, the id goes in family 4.
_AWS_KEY_ID = r"(?<![A-Za-z0-9])A[KS]IA[A-Z0-9]{16}(?![A-Za-z0-9])"
AWS_SECRET_KEY_NEAR_ID = re.compile(
    rf"(?:(?P<key_id>{_AWS_KEY_ID})[^\r\n]{{0,120}}?)?"
    r"(?<![A-Za-z0-9/+=])"
    r"(?![0-9a-fA-F]{40}(?![A-Za-z0-9/+=]))"
    r"(?=[a-z0-9/+]{0,39}+[A-Z])(?=[A-Z0-9/+]{0,39}+[a-z])"
    r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
    rf"(?(key_id)|(?=[^\r\n]{{0,120}}?{_AWS_KEY_ID}))"
)

# 24. AWS STS session tokens, which identify themselves: they are base64 of a binary
# blob that starts with the same bytes, "IQoJb3JpZ2lu" (current) or "FwoGZXIvYXdz" /
# "FQoGZXIvYXdz" (older), and run to several hundred characters. Presigned URLs carry
# them URL-encoded in "X-Amz-Security-Token=", hence "%" in the class.
AWS_SESSION_TOKEN = re.compile(
    r"(?<![A-Za-z0-9/+=%])(?:IQoJb3JpZ2lu|F[wQ]oGZXIvYXdz)[A-Za-z0-9/+=%]{100,}+"
)

# 25. Slack incoming-webhook and workflow URLs:
# "https://hooks.slack.com/services/T<team>/B<bot>/<secret>" (workflows and triggers add
# a segment). The team and bot ids are not secret and stay readable; the last segment,
# which alone lets anyone post to the channel, is redacted.
SLACK_WEBHOOK_URL = re.compile(
    r"(?<![A-Za-z0-9.-])hooks\.slack\.com/(?:services|workflows|triggers)/"
    r"(?:[A-Za-z0-9]{1,40}+/){1,3}+(?P<secret>[A-Za-z0-9]{8,}+)"
)

# 26. Azure connection strings: "DefaultEndpointsProtocol=https;AccountName=x;
# AccountKey=<base64>;EndpointSuffix=core.windows.net" (storage) and
# "Endpoint=sb://...;SharedAccessKeyName=x;SharedAccessKey=<base64>" (Service Bus, Event
# Hubs). A value runs to the next ";" (the separator) or whitespace. A
# "SharedAccessSignature=" value is a whole SAS query string, so it runs over "&" too; a
# SAS in a URL is cut at its "sig=" parameter, the part that grants the access.
# "SharedAccessKeyName=" is followed by "Name", not "=", and stays.
AZURE_CONNECTION_SECRET = re.compile(
    # The leading letter test is only a fast reject, as in family 13.
    r"(?=[as])(?:(?<![A-Za-z0-9_])(?:Account|SharedAccess)Key[ \t]*+="
    r"|(?<![A-Za-z0-9_])(?P<sas>SharedAccessSignature)[ \t]*+="
    r"|(?<=[?&;])sig=)"
    r"[ \t]*+(?P<secret>(?(sas)[^;\s\"'`]++|[^;&\s\"'`]++))",
    re.IGNORECASE,
)

# 27. Assignments to credential names in any case and any config or code syntax: the
# password family ("password", "passwd", "passphrase", "pwd"), "secret" and
# "secret_key", and AWS's own key names as the CLI, SDKs and STS print them
# ("aws_secret_access_key = ..." in ~/.aws/credentials, "SecretAccessKey": "..." and
# "SessionToken": "..." from "aws sts assume-role", "secretAccessKey:" in JavaScript,
# "AWS Secret Access Key [None]: ..." from "aws configure"). A name may carry up to four
# "word_" / "word." / "word-" parts before it ("client_secret", "DB_PASSWORD",
# "spring.datasource.password", "--db-password") but must end the key, so
# "password_reset", "password_validators" and "secretName" stay. Covers YAML and JSON
# ("password: x", "\"password\": \"x\""), Django settings ("'PASSWORD': 'x'"), INI,
# shell and libpq conninfo ("host=db password=x dbname=app"), ODBC ("PWD=x;"), query
# strings, Go (":="), PHP and Ruby ("=>").
#
# Unlike families 14 and 15 these names are ordinary words, so the value is judged:
#
# - Prose without "=" or ":" is never touched. After one, a bare value is one word, and
#   not an English word followed by more words (_PROSE_WORD), so "Password: see the
#   vault" and "password: The password part of the URL" stay, while "Password: hunter2
#   is in the vault" loses "hunter2" only.
# - A quoted value is redacted unless empty, unclosed on its line (in
#   'getpass("Password: ")' that quote closes a string) or a placeholder
#   ("${DB_PASSWORD}", "{{ vault_db_password }}", "<your password>", "$PW", "%PW%",
#   "****", and "string" as Swagger and JSON schemas write it). Markdown counts too:
#   "**Password:** x", and "password: `x`", whose backticked value is judged like a bare
#   one below because "`str`" is code in Markdown.
# - A bare value is taken for code, not a secret, when it is a type or literal
#   ("password: str", "Optional[str]", "None", "null", "true", "void 0"), a call or
#   subscript ("getpass()", "os.environ['PW']", "request.POST.get(...)"), a dotted
#   attribute path ("self.password", "settings.DB_PASSWORD"), a variable named like a
#   credential ("password=password", "password=raw_password", "secret=client_secret",
#   "pw"), a string prefix ('f"{name}-pw"'), an SQL placeholder ("%s", "?", ":password",
#   "$1"), a YAML tag or block ("!Ref", "|"), or opens a bracket ("{password}", "(").
#   After ":" a type annotation ("password: HiddenText | None") is code; after " = "
#   (spaced, as Python writes it and shell never does) an identifier followed by "," or
#   an operator word is ("usable_password = value and ..."), and after a tuple target
#   ("username, password = auth") any identifier is. Any of these can in theory be a
#   real password; redacting every Python keyword argument would be worse.
# - A bare value ends at whitespace, a quote, ",", ";", a closing bracket or "<", and
#   after "=" also at "&", so "(password: x)", "PWD=x;", "password=x&user=y" (a query
#   string) and "<td>password: x</td>" keep their punctuation, while "password: a&b"
#   (YAML) goes whole. An earlier "[REDACTED]" inside it is taken along whole.
# - "PWD=/home/bob" is the shell's working directory (as "env" prints it), so a "pwd"
#   value starting with "/" or "~" stays; "/etc/passwd:" is a file name in an error
#   message, and "passwd:" is judged more strictly (see _PASSWD_SYSTEM_TEXT below)
#   because nsswitch.conf and the passwd command write it too.
# - AWS key names also accept whitespace instead of "=" or ":" when a 40-character run
#   follows ("aws configure set aws_secret_access_key ...", "--secret-access-key ...").
_CREDENTIAL_END = r"(?![^\s\"'`,;&)\]}<>])"
_CREDENTIAL_PLACEHOLDER = (
    r"(?:\$[{(]|\{\{|%\("
    r"|(?:\$\w++|%\w++%|\*++|\u2022++|<[^<>\r\n]{0,100}+>|(?:string|str|text)\??)"
    rf"(?:(?P=quote)|{_CREDENTIAL_END}))"
)
# An English word followed by more words starts a sentence, not a password: docstrings
# ("password: The password part of the URL"), prose ("Password: see the vault", "docker
# login -p with a token"). Used with re.IGNORECASE or inside "(?i:...)".
_PROSE_WORD = (
    r"(?:the|a|an|and|or|not|no|if|is|are|be|by|to|of|for|in|on|at|as|with|from|this|that"
    r"|these|it|its|see|use|set|must|should|will|can|may|when|where|which|who|how|only"
    r"|also|your|our|their|my|enter|type|same|default|all|each|please)[ \t]++(?=\S)"
)
_IDENTIFIER_PATH = r"[A-Za-z_$][A-Za-z0-9_$]*+(?:\.[A-Za-z_$][A-Za-z0-9_$]*+)"
_CREDENTIAL_CODE_FORMS = (
    # A call or subscript: "getpass()", "os.environ[", "$_POST[".
    _IDENTIFIER_PATH + r"*+[(\[]",
    # A dotted attribute path: "self.password", "settings.DB_PASSWORD".
    _IDENTIFIER_PATH + r"++" + _CREDENTIAL_END,
    # A type or literal.
    r"(?:str|bytes|string|none|null|nil|true|false|undefined|optional|any|secretstr"
    r"|int|bool|required|void)(?![A-Za-z0-9_$.-])",
    # An English word that starts a sentence rather than a password.
    _PROSE_WORD,
    # A variable named like a credential.
    r"(?:[A-Za-z0-9_]{0,40}?_)?(?:pwd|pw|pass)" + _CREDENTIAL_END,
    r"[A-Za-z0-9_]{0,40}?(?:password|passwd|passphrase|secret|token)" + _CREDENTIAL_END,
    # A string prefix: the value is a literal such as f"{name}-password" or b"...".
    r"[rbuf]{1,2}+[\"']",
    # An SQL placeholder.
    r"(?:%s|\?|:[A-Za-z_]\w*+|\$\d++)" + _CREDENTIAL_END,
    # A YAML tag or block scalar, or an opening bracket other than a marker's.
    r"![A-Za-z]|\||[{(]|\[(?!" + re.escape(REDACTED[1:]) + r")",
)
_CREDENTIAL_CODE = "(?:" + "|".join(_CREDENTIAL_CODE_FORMS) + ")"
_CREDENTIAL_NAME = (
    r"(?:[A-Za-z0-9]{1,32}[_.-]){0,4}"
    r"(?:password[0-9]?|(?P<passwd>(?<![/\\])passwd)|passphrase|(?P<pwd>pwd)|secret(?:[_-]?key)?"
    r"|(?P<aws>secret[_-]?access[_-]?key|session[_-]?token|security[_-]?token))"
    r"|(?P<aws_spaced>aws[ ]secret[ ]access[ ]key|aws[ ]session[ ]token)"
)
# "=" or ":" (also ":=" and "=>"), optionally wrapped in Markdown bold ("**Password:**",
# "**Password**:") or after a closing quote or backtick.
_CREDENTIAL_SEPARATOR = (
    r"(?:[\"'`]|\*{1,2}+)?+"
    r"(?(aws_spaced)(?:[ \t]*+\[[^\]\r\n]{0,64}+\])?+)"
    r"(?:(?P<spaced>[ \t]++)?+(?::=|=>|(?P<colon>:)(?![:=])|=(?![:=]))"
    r"[ \t]*+(?:\*{1,2}+[ \t]++)?+"
    r"|(?(aws)[ \t]++(?=[A-Za-z0-9/+]{40})|(?!)))"
)
_CREDENTIAL_BARE_RUN = rf"(?:{_MARKER_LITERAL}|(?(colon)[^\s\"'`,;)\]}}<>]|[^\s\"'`,;&)\]}}<>]))++"
# Python statements, recognised by their spacing (" = ", where shell, libpq and query
# strings write "="): an identifier value followed by "," or an operator word is an
# expression ("usable_password = value and ..."), and after a tuple target
# ("username, password = auth") any identifier value is.
_PYTHON_EXPRESSION = (
    _IDENTIFIER_PATH + r"*+(?:[ \t]*+,|[ \t]++(?:and|or|if|else|not|in|is)(?![A-Za-z0-9_]))"
)
_PYTHON_TUPLE_VALUE = _IDENTIFIER_PATH + r"*+" + _CREDENTIAL_END
# A type annotation, recognised by what follows the type: "password: HiddenText | None",
# "password: SecretStr = Field(...)".
_TYPE_ANNOTATION = _IDENTIFIER_PATH + r"*+[ \t]*+(?:\|(?!\|)|=(?![=>]))"
# "passwd:" also starts system text rather than a value: nsswitch.conf lists name
# services ("passwd: files systemd"), and the passwd command reports in sentences
# ("passwd: Authentication token manipulation error", "passwd: user 'bob' does not
# exist"), and "passwd:gecos" without a space is a name (Scheme's passwd accessors). So
# after "passwd:" a bare value must follow a space, and a source name or a word of
# letters only followed by more text is kept; a password with a digit or a sign in it,
# or one at the end of the text, is not.
_NSSWITCH_SOURCE = (
    r"(?:files|compat|systemd|sss|ldap|nis(?:plus)?+|db|winbind|dns|hesiod|extrausers"
    r"|altfiles|usrfiles|cache|myhostname|mymachines|resolve|wins|mdns[46]?+(?:_minimal)?+)"
    r"(?![^\s\[])"
)
_PASSWD_SYSTEM_TEXT = rf"(?:{_NSSWITCH_SOURCE}|[A-Za-z]++[ \t]++\S)"
CREDENTIAL_ASSIGNMENT = re.compile(
    r"(?=[A-Za-z])(?:(?<=--)|(?<![A-Za-z0-9_.-]))(?:(?<=, )(?P<listed>))?+"
    rf"(?:{_CREDENTIAL_NAME})(?![A-Za-z0-9_])"
    rf"{_CREDENTIAL_SEPARATOR}"
    r"(?:(?P<quote>[\"'])|(?P<tick>`))?+"
    rf"(?!{_CREDENTIAL_PLACEHOLDER})"
    r"(?!\\\r?\n)"  # a line continued: the value is on the next line (family 39)
    r"(?(pwd)(?![/~]))"
    r"(?P<secret>"
    r"(?(quote)(?:(?!(?P=quote))[^\r\n])++(?=(?P=quote))"
    rf"|(?!{_CREDENTIAL_CODE})"
    rf"(?(passwd)(?(colon)(?<=[ \t*])(?!{_PASSWD_SYSTEM_TEXT})))"
    rf"(?(colon)(?!{_TYPE_ANNOTATION})"
    rf"|(?(spaced)(?!{_PYTHON_EXPRESSION})(?(listed)(?!{_PYTHON_TUPLE_VALUE}))))"
    rf"(?(tick)[^`\r\n]++(?=`)|{_CREDENTIAL_BARE_RUN}))"
    r")",
    re.IGNORECASE,
)

# 28. npm registry credentials in ".npmrc" ("//registry.npmjs.org/:_authToken=...",
# "_auth=<base64 user:pass>", "//host/:_password=<base64>") and Yarn Berry's
# ".yarnrc.yml" ("npmAuthToken: ..."). An npm key follows the "/:" of its registry
# scope, or starts a line; "self._password = None" in Python is neither. "${NPM_TOKEN}",
# the usual CI form, is a reference to a secret rather than one and stays, and so does
# a bare value family 27 takes for code.
NPMRC_AUTH = re.compile(
    r"(?:(?<=:)_(?:authToken|auth|password)|(?<![^\r\n])_(?:authToken|auth)"
    r"|(?<![A-Za-z0-9_])npmAuth(?:Token|Ident))"
    r"[\"']?+[ \t]*+[:=][ \t]*+"
    r"(?P<quote>[\"'])?+(?!\$\{)"
    r"(?P<secret>(?(quote)(?:(?!(?P=quote))[^\r\n])++(?=(?P=quote))"
    rf"|(?!(?i:{_CREDENTIAL_CODE}))[^\s\"'`]++))"
)

# 29 and 30 read passwords given on a command line, in the same command as the program
# that takes them. The value may be quoted (the quotes stay) and is never a shell
# reference ("$MYSQL_ROOT_PASSWORD", "${X}", "$(cat f)"), which names a secret without
# holding it; it never starts with "-" (that is the next option), and a bare one is not
# an English word followed by more words (prose about the flag, see _PROSE_WORD). The
# arguments between the program and the flag are walked a whole space-separated word at
# a time, at most 20 of them, and stop at a pipe, ";" or "&" (the next command).
_CLI_ARGUMENTS = r"(?:[ \t]++[^\s|;&]++){0,20}?"
_CLI_VALUE = (
    r"(?P<quote>[\"'])?+(?!\$[{(A-Za-z_])(?!-)"
    r"(?P<secret>(?(quote)(?:(?!(?P=quote))[^\r\n])++"
    rf"|(?!(?i:{_PROSE_WORD}))[^\s\"'`|;&<>()]++))"
)

# 29. MySQL and MariaDB clients: "-p" glued to the password ("mysql -u root -pS3cret",
# "mysqldump -uroot -p'S3 cret' db") or "--password=...", anywhere later in the same
# command (up to a pipe, ";" or "&"). A bare "-p" asks for the password and "-P 3306" is
# the port (case matters), so both stay.
MYSQL_PASSWORD_FLAG = re.compile(
    r"(?<![A-Za-z0-9_.-])"
    r"(?:mysql(?:dump|admin|import|check|sh|pump|binlog|slap)?|mariadb(?:-?dump|-?admin)?)"
    r"(?:\.exe)?+(?![A-Za-z0-9_.-])"
    rf"{_CLI_ARGUMENTS}[ \t]++(?:-p|--password=){_CLI_VALUE}"
)

# 30. Registry logins: "docker login -u bob -p <password> registry.example.com" and
# "--password <password>" / "--password=...", also for podman, nerdctl, buildah, skopeo,
# oras and "helm registry login". "--password-stdin" takes no value and stays; "-p" means
# something else (ports) in every other docker command, so "login" must come first.
REGISTRY_LOGIN_PASSWORD = re.compile(
    r"(?<![A-Za-z0-9_.-])(?:docker|podman|nerdctl|buildah|skopeo|oras|helm[ \t]++registry)"
    r"(?:\.exe)?+(?:[ \t]++[^\s|;&]++){0,6}?[ \t]++login(?![A-Za-z0-9_.-])"
    rf"{_CLI_ARGUMENTS}[ \t]++(?:-p(?:[ \t]++|=)?+|--password(?:[ \t]++|=)){_CLI_VALUE}"
)


# --- Families added after the second security review ------------------------------------
#
# 31-38 close the kinds a second probe still found stored as sent: three more token
# formats, "curl -u", tokens in URL query parameters, a bare AWS secret key in prose, and
# known-prefix tokens disguised by a line break, URL encoding or an HTML entity.

# 31. Shopify access tokens: "shpat_" (Admin API), "shpca_" (custom app), "shppa_"
# (private app) and "shpss_" (shared secret), each with 32 hex digits.
SHOPIFY_TOKEN = re.compile(r"(?<![A-Za-z0-9_])shp(?:at|ca|pa|ss)_[0-9a-fA-F]{32}(?![A-Za-z0-9_])")

# 32. Twilio API keys: "SK" and 32 hex digits (the key's SID, which with its secret
# authenticates as the account). Exactly 32, so "SKU-12345" and longer ids stay.
TWILIO_API_KEY = re.compile(r"(?<![A-Za-z0-9_])SK[0-9a-fA-F]{32}(?![A-Za-z0-9_])")

# 33. Linear personal API keys ("lin_api_" and 40 letters and digits) and OAuth access
# tokens ("lin_oauth_"); 32+ tolerates other lengths while "lin_api_key" stays.
LINEAR_KEY = re.compile(r"(?<![A-Za-z0-9_])lin_(?:api|oauth)_[A-Za-z0-9]{32,}+")

# 34. curl's user option: "-u user:password", "-uuser:password", "--user user:password"
# and the proxy's "-U" / "--proxy-user", anywhere later in the same command (up to a
# pipe, ";" or "&"). The password is what follows the first ":"; the user name stays.
# A user alone ("-u bob", curl then asks), an empty password ("-u :" for Negotiate) and
# a shell reference ("-u admin:$TOKEN") hold no secret and stay.
CURL_USER_PASSWORD = re.compile(
    r"(?<![A-Za-z0-9_.-])curl(?:\.exe)?+(?![A-Za-z0-9_.-])"
    rf"{_CLI_ARGUMENTS}[ \t]++(?:-[uU][ \t]*+|--(?:proxy-)?user(?:[ \t]++|=))"
    r"(?P<quote>[\"'])?+(?!-)[^\s:\"'`|;&<>()]*+:(?!\$[{(A-Za-z_])"
    r"(?P<secret>(?(quote)(?:(?!(?P=quote))[^\r\n])++(?=(?P=quote))"
    r"|[^\s\"'`|;&<>()]++))"
)

# 35. Tokens in URL query parameters and fragments: "?access_token=...", "&token=...",
# "#access_token=..." (OAuth's implicit flow), "?api_key=...", GitLab's
# "private_token", and the signatures and session tokens of presigned S3 and GCS URLs.
# The value runs to the next "&", "#", quote, bracket or space; at least 8 characters,
# so "?token=short" and flags stay. A placeholder ("{token}", "<token>", "${TOKEN}") or a
# value built in code ("?access_token=" + token) is no token and stays. "&amp;" in HTML
# puts ";" before the name, hence ";" as a boundary too.
_URL_TOKEN_NAMES = (
    r"(?:access|refresh|id|auth)[_-]?token|token|api[_-]?key|private[_-]?token"
    r"|x-amz-(?:signature|security-token)|x-goog-signature"
)
URL_TOKEN_PARAMETER = re.compile(
    rf"(?<=[?&#;])(?:{_URL_TOKEN_NAMES})=(?!\$)"
    r"(?P<secret>[^\s&#\"'`<>()\[\]{},;]{8,}+)",
    re.IGNORECASE,
)

# 36. AWS secret access keys in prose: the 40-character base64 run of family 23, on the
# same line as the word "aws" or "secret" rather than a key id: after the word within 12
# words ("the aws secret key is ..."), or before it within 80 characters ("... is the AWS
# secret for staging"), one pattern each. The gap after the word is walked a run at a
# time (each run bounded, so a word inside one endless run costs a bounded scan), so the
# key is only tried where a run starts, a dozen times per word at most. The words are
# common, so the run is judged harder than in family 23: besides mixing upper and lower
# case and not being hex (a SHA-1), it holds a digit, "+" or "/" (which a CamelCase name
# of 40 letters does not) and at most two "/" (a path of 40 characters has more; a random
# key has three or more about once in forty). Each word's first letter comes first, the
# cheapest test where no word starts; the lookbehind after it is the word's left
# boundary.
_AWS_CONTEXT_WORD = r"(?:(?:a(?<![A-Za-z]a)ws|A(?<![A-Za-z]A)(?:WS|ws))(?![a-z])|(?i:secret)(?!ar))"
_AWS_SECRET_KEY = (
    r"(?<![A-Za-z0-9/+])"
    # The exact length first: it rejects the ordinary word at once.
    r"(?=[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=]))"
    r"(?![0-9a-fA-F]{40})"
    r"(?=[a-z0-9/+]{0,39}+[A-Z])(?=[A-Z0-9/+]{0,39}+[a-z])(?=[A-Za-z]{0,39}+[0-9/+])"
    r"(?!(?:[A-Za-z0-9+]*+/){3})"
    r"(?P<secret>[A-Za-z0-9/+]{40})"
)
AWS_SECRET_KEY_AFTER_WORD = re.compile(
    _AWS_CONTEXT_WORD
    + r"(?:[A-Za-z0-9/+]{0,80}+[^A-Za-z0-9/+\r\n]{1,80}+){1,12}?"
    + _AWS_SECRET_KEY
)
AWS_SECRET_KEY_BEFORE_WORD = re.compile(
    _AWS_SECRET_KEY + rf"(?=[^\r\n]{{0,80}}?{_AWS_CONTEXT_WORD})"
)


# 37 and 38 find the self-identifying tokens of the families above when they are
# disguised: broken by line breaks (a terminal or an editor wrapped it, or a sender did
# on purpose), or with a URL-encoded or HTML-entity character in it. Each entry: the
# prefix, the body's characters, the shortest body its own family redacts, the body's
# fixed length where the format has one, and the prefix spelt out.
@dataclass(frozen=True)
class _PrefixedToken:
    prefix: str
    body: str
    shortest: int
    length: int | None
    spellings: tuple[str, ...]


_PREFIXED_TOKENS = (
    _PrefixedToken("gh[pousr]_", "[A-Za-z0-9]", 30, 36, tuple(f"gh{k}_" for k in "pousr")),
    _PrefixedToken("github_pat_", "[A-Za-z0-9_]", 22, 82, ("github_pat_",)),
    _PrefixedToken(
        "gl(?:pat|dt|rt|ptt|oas|cbt|ft|soat|imt|agent)-",
        "[A-Za-z0-9_-]",
        20,
        None,
        tuple(
            f"gl{k}-"
            for k in ("pat", "dt", "rt", "ptt", "oas", "cbt", "ft", "soat", "imt", "agent")
        ),
    ),
    _PrefixedToken("npm_", "[A-Za-z0-9]", 36, 36, ("npm_",)),
    _PrefixedToken("hf_", "[A-Za-z0-9]", 34, 34, ("hf_",)),
    _PrefixedToken("dckr_(?:pat|oat)_", "[A-Za-z0-9_-]", 27, None, ("dckr_pat_", "dckr_oat_")),
    _PrefixedToken("sk-", "[A-Za-z0-9_-]", 20, None, ("sk-",)),
    _PrefixedToken("sk_(?:live|test)_", "[A-Za-z0-9]", 16, None, ("sk_live_", "sk_test_")),
    _PrefixedToken("rk_(?:live|test)_", "[A-Za-z0-9]", 16, None, ("rk_live_", "rk_test_")),
    # Slack's own rule takes 10 (so "xoxb-token" stays); real tokens run 40 or more, and
    # 30 keeps two short words on two lines ("xoxb-token" then "xoxo-hugs") apart.
    _PrefixedToken(
        "x(?:ox[abprs]|app)-",
        "[A-Za-z0-9-]",
        30,
        None,
        (*(f"xox{k}-" for k in "abprs"), "xapp-"),
    ),
    _PrefixedToken("aim_", "[A-Za-z0-9_-]", 32, 43, ("aim_",)),
    _PrefixedToken(
        "shp(?:at|ca|pa|ss)_",
        "[0-9a-fA-F]",
        32,
        32,
        tuple(f"shp{k}_" for k in ("at", "ca", "pa", "ss")),
    ),
    _PrefixedToken("lin_api_", "[A-Za-z0-9]", 32, 40, ("lin_api_",)),
    _PrefixedToken("lin_oauth_", "[A-Za-z0-9]", 32, None, ("lin_oauth_",)),
    _PrefixedToken("AIza", "[A-Za-z0-9_-]", 35, 35, ("AIza",)),
    _PrefixedToken("SK", "[0-9a-fA-F]", 32, 32, ("SK",)),
    # Added by the third review: AWS access key ids (family 4). Not Meta's "EAA", which
    # base64 data holds so often that family 37's gate would let most of it through.
    _PrefixedToken("A[KS]IA", "[A-Z0-9]", 16, 16, ("AKIA", "ASIA")),
)
# Where a prefixed token may start: not inside a run of token characters, but right
# after a URL escape ("%3Dghp_...") it may. Every prefix starts with a letter, and the
# boundary is checked after it, so that each alternative starts with a literal letter,
# the cheapest test at the many places where no prefix stands.
_AFTER_PREFIXED_TOKEN_START = r"(?:(?<=%[0-9A-Fa-f]{2}.)|(?<![A-Za-z0-9_].))"


def _at_token_start(prefix: str) -> str:
    return prefix[0] + _AFTER_PREFIXED_TOKEN_START + prefix[1:]


# 37. A prefixed token broken by line breaks: anywhere after its first character, in
# the prefix too ("gh" then "p_..." on the next line), once or many times (a long token
# a terminal wrapped), each break a newline with the next line's indentation, or a shell
# or Python line continued with a backslash. A break must fall before the body is
# complete (before its fixed length, or its shortest length for formats without one),
# because a complete token on one line is its family's, and its next line ordinary
# text. The parts must then add up to the fixed length exactly, or to at least the
# shortest length: "ghp_" and 20 characters, then 16 on the next line, is a token;
# "sk-learn" and "numpy" on the next are two words. The token ends with the part that
# completes it, so the next line's first word stays even when it runs on from the last
# part. A regex cannot add lengths, so the pattern takes a prefix and every run of token
# characters and break that follow, and ``split_token_span`` (in ``MATCH_CHECKS``) reads
# the format from the prefix, takes the run of its own characters and says where the
# token ends. The boundary is tested first and the prefixes are grouped by their first
# letter, so a place where no prefix starts costs a test or two; the runs are possessive
# and a match never fails once its prefix is found, so each text is read once.
_LINE_BREAK = r"(?:\\?+\r?\n[ \t]*+)"
LINE_BREAK = re.compile(_LINE_BREAK)
# Each prefix spelt out, to its format.
_TOKEN_OF_SPELLING = {spelling: token for token in _PREFIXED_TOKENS for spelling in token.spellings}
# A run of one format's characters and the breaks inside it, by format.
_TOKEN_RUNS = {
    token: re.compile(f"(?:{token.body}++|{_LINE_BREAK}(?={token.body}))*+")
    for token in _PREFIXED_TOKENS
}


def _broken_prefixes() -> str:
    """Every spelling, a break allowed between any two of its characters, grouped by
    its first character."""
    by_first: dict[str, list[str]] = {}
    for spelling in _TOKEN_OF_SPELLING:
        rest = "".join(f"{_LINE_BREAK}?+{re.escape(c)}" for c in spelling[1:])
        by_first.setdefault(spelling[0], []).append(rest)
    return "|".join(f"{re.escape(first)}(?:{'|'.join(rests)})" for first, rests in by_first.items())


SPLIT_PREFIXED_TOKEN = re.compile(
    # A prefix starts a run of token characters, or follows a URL escape ("%3Dghp_...").
    r"(?:(?<![A-Za-z0-9_])|(?<=%[0-9A-Fa-f]{2}))"
    rf"(?P<prefix>{_broken_prefixes()})"
    rf"(?P<body>(?:[A-Za-z0-9_-]++|{_LINE_BREAK}(?=[A-Za-z0-9_-]))*+)"
)


def split_token_span(match: re.Match[str]) -> tuple[int, int] | None:
    """The span of the token a family-37 match holds, or None when it holds none.

    ``match`` comes from ``SPLIT_PREFIXED_TOKEN``: its ``prefix`` names the format, and
    its ``body`` holds the characters of every format, of which the token takes the run
    of its own.
    """
    token = _TOKEN_OF_SPELLING[LINE_BREAK.sub("", match.group("prefix"))]
    whole = token.length or token.shortest
    start, body_start = match.start(), match.start("body")
    run = _TOKEN_RUNS[token].match(match.string, body_start, match.end())
    end = body_start if run is None else run.end()
    broken = LINE_BREAK.search(match.string, start, body_start) is not None
    size = 0
    position = body_start
    # Lazily: the token ends within its first few parts, and a run may go on for pages.
    for gap in itertools.chain(LINE_BREAK.finditer(match.string, body_start, end), [None]):
        part_end = end if gap is None else gap.start()
        size += part_end - position
        if size >= whole:
            if not broken or (token.length is not None and size != token.length):
                return None
            return start, part_end
        if gap is None:
            return None
        broken = True
        position = gap.end()
    return None


# 38. A prefixed token with URL escapes or HTML entities in it: "ghp%5F..." (the prefix's
# "_" or "-" percent-encoded, as in a URL or a form body), or an invisible character
# written as an entity or an escape inside the body ("ghp_abc&#8203;def", "&#x200B;",
# "&zwnj;", "%E2%80%8B"), which a browser or a decoder drops again. The fillers do not
# count towards the body's length. At least one disguise is required (the lookahead
# refuses a plain prefix and body that no filler follows), so a plain token is left to
# its own family. Any numeric entity is a filler, since a visible character written as
# an entity inside a token hides it just as well.
_ENCODED_UNDERSCORE = r"(?:_|(?i:%5f|&#0*95;|&#x0*5f;|&lowbar;|&underbar;))"
_ENCODED_HYPHEN = r"(?:-|(?i:%2d|&#0*45;|&#x0*2d;))"
_TOKEN_FILLER = (
    r"(?i:&(?:#[0-9]{1,8}|#x[0-9a-f]{1,8}|shy|zwnj|zwj|lrm|rlm|zerowidthspace"
    r"|negative(?:very)?(?:thin|medium|thick)space|nobreak|invisible(?:times|comma)"
    r"|it|ic|af|applyfunction|lowbar|underbar);"
    r"|%(?:e2%80%8[b-f]|e2%81%a[0-4]|ef%bb%bf|c2%ad|cd%8f|e1%a0%8e|5f|2d))"
)


def _disguised_token(token: _PrefixedToken) -> str:
    prefix = token.prefix.replace("_", _ENCODED_UNDERSCORE).replace("-", _ENCODED_HYPHEN)
    plain = f"{token.prefix[1:]}{token.body}*+(?!{_TOKEN_FILLER})"
    return (
        _at_token_start(f"{prefix[0]}(?!{plain}){prefix[1:]}")
        + f"(?:{_TOKEN_FILLER}*+{token.body}){{{token.shortest},}}+"
    )


DISGUISED_PREFIXED_TOKEN = re.compile("|".join(map(_disguised_token, _PREFIXED_TOKENS)))


# --- Families added after the third security review --------------------------------------
#
# 39 and 40 close the kinds a third probe still found stored as sent: a credential whose
# value starts the next line, and credentials wrapped in base64. Family 37 was widened by
# the same review (a break anywhere in the token, inside its prefix too, and many of them).

# 39. A credential's value alone on the line after its name: YAML's block forms
# ("password:\n  hunter2", "secret_key: |\n  ..."), a shell or Python line continued
# with a backslash ("DB_PASSWORD=\\\n  hunter2"), a folded header ("Authorization:
# Bearer\n  <token>") or Markdown ("**Password:**\n`hunter2`"). The names are family
# 27's, the header names of family 13 and, after a "_", "." or "-" ("API_TOKEN",
# "client.secret"), "token", "key" and "credentials". The name must start its line (after
# indentation, a list mark, "export", "--" or an opening bracket or quote), as a key
# does, so the header of a block of code ("if not self.token:" then "return") stays. The
# value is judged as family 27 judges one (placeholders, code, prose stay), it must be
# all its line holds (a trailing comma aside), hold a letter or a digit, and neither
# start a comment ("#") nor end in ":", so the next line of YAML ("password:\n
# required: true", "secret:\n  secretKeyRef:"), a list item, a docstring's sentence or
# a terminal's next message stays. The pattern starts at the separator that ends a
# line, the rare part, and ``name_before_span`` (in ``MATCH_CHECKS``) reads the line in
# front of it, which a lookbehind of the ``re`` module cannot (its width varies).
_NEXT_LINE_NAME = (
    r"(?:password[0-9]?|passwd|passphrase|pwd|secret(?:[_-]?(?:access[_-]?)?key)?"
    r"|session[_-]?token|security[_-]?token|(?<=[_.-])(?:token|key|credentials?)"
    r"|(?:proxy-)?authorization)"
)
_KEY_BEFORE_SEPARATOR = re.compile(
    r"[ \t]*+(?:(?:[-*>+]|[0-9]{1,3}[.)])[ \t]++)?+(?:export[ \t]++|--)?+"
    r"[\[{(]?+[ \t]*+[\"'`*]{0,2}+"
    rf"(?:[A-Za-z0-9]{{1,32}}[_.-]){{0,4}}{_NEXT_LINE_NAME}"
    r"[\"'`]?+\*{0,2}+[ \t]*+",
    re.IGNORECASE,
)
_SCHEME_WORD = r"(?:bearer|basic|token)"
CREDENTIAL_ON_NEXT_LINE = re.compile(
    r"[:=](?<=[A-Za-z0-9_\"'`* \t][:=])(?:(?<=:)=|(?<==)>)?+(?![:=])"
    r"[ \t]*+\*{0,2}+"
    rf"(?:{_SCHEME_WORD}[ \t]*+)?+(?:[|>][-+]?+[ \t]*+)?+"
    r"\\?+\r?\n[ \t]*+"
    rf"(?:{_SCHEME_WORD}[ \t]++)?+"
    # The shape of a bare value (below) or a quote, tested first: it is cheap, and
    # rejects the usual next line ("  host: db", "  name:") before the value is judged.
    r"(?=[\"'`]|[^\s\"'`,;]++(?<![:,;])[ \t]*+,?+[ \t]*+(?![^\r\n]))"
    r"(?P<quote>[\"'`])?+"
    rf"(?!{_CREDENTIAL_PLACEHOLDER})(?!{_CREDENTIAL_CODE})(?!#)"
    r"(?P<secret>(?(quote)(?:(?!(?P=quote))[^\r\n])++(?=(?P=quote))"
    r"|(?=[^\s\"'`,;]*?[A-Za-z0-9])[^\s\"'`,;]++(?<![:,;])))"
    r"(?(quote)(?P=quote))[ \t]*+,?+[ \t]*+(?![^\r\n])",
    re.IGNORECASE,
)
# How long a line before its separator may be: a key, its decoration and indentation.
_KEY_LINE_REACH = 120


def name_before_span(match: re.Match[str]) -> tuple[int, int] | None:
    """The value of a family-39 match when its line, up to the separator, is a
    credential's name, else None."""
    separator = match.start()
    line_start = match.string.rfind("\n", 0, separator) + 1
    if separator - line_start > _KEY_LINE_REACH:
        return None
    key = _KEY_BEFORE_SEPARATOR.fullmatch(match.string, line_start, separator)
    return match.span("secret") if key else None


# 40. Credentials wrapped in base64, which hides every other family's shape: a
# "user:password" pair as HTTP Basic, Docker's config.json ("auth") and .npmrc
# ("_auth") write it, or any text that holds a secret of the families above ("ghp_...",
# "DB_PASSWORD=...", a whole config file). A run of base64 (standard or URL-safe, padded
# or not) of at least 12 characters (9 bytes) is decoded, and it is redacted when the
# decoded text is printable and either is a user and a password or holds a secret
# (``base64_span`` in ``MATCH_CHECKS``). Words, identifiers, hashes, ids and images
# decode to bytes that are no text, and a text without a secret (a sentence, a URL, a
# host and port, a time, a digest's name) stays. Runs over 4,096 characters are left
# alone: no credential is that long, and a large blob would cost its decoding.
_BASE64_RUN = r"[A-Za-z0-9+/_-]"
BASE64_CREDENTIAL = re.compile(
    rf"(?<!{_BASE64_RUN})"
    # Base64 of 9 bytes or more mixes upper and lower case; words, snake_case names, hex
    # and ids do not, and are passed over here, before any decoding.
    r"(?=[a-z0-9+/_-]*+[A-Z])(?=[A-Z0-9+/_-]*+[a-z])"
    rf"(?P<secret>(?:{_BASE64_RUN}{{4}}){{3,}}+(?:{_BASE64_RUN}{{2,3}}+)?+={{0,2}}+)"
    r"(?![A-Za-z0-9+/=_-])"
)
_BASE64_MAX_CHARS = 4096
# A user and a password, as HTTP Basic joins them: a user name (an e-mail address too),
# ":", and a password of 3 or more characters that holds a letter or runs to 8 or more
# (so "localhost:8080" and "12:30:45" stay). A URL's scheme or a digest's name is no
# user ("https://...", "sha256:..."), and "//" starts no password.
_USER_PASSWORD = re.compile(
    r"(?!(?:https?|ftp|file|mailto|urn|data|tel|sha[0-9]*|md5):)"
    r"[A-Za-z0-9._@+-]{1,64}:(?!//)(?=\S*?[A-Za-z]|\S{8})\S{3,128}",
    re.IGNORECASE,
)
_TEXT_WHITESPACE = str.maketrans(dict.fromkeys("\t\n\r"))


def _base64_text(run: str) -> str | None:
    """The text that ``run`` encodes in base64 or base64url, or None if it is no text."""
    digits = run.rstrip("=")
    urlsafe = "-" in digits or "_" in digits
    if (urlsafe and ("+" in digits or "/" in digits)) or len(digits) % 4 == 1:
        return None
    padded = digits + "=" * (-len(digits) % 4)
    try:
        raw = base64.urlsafe_b64decode(padded) if urlsafe else base64.b64decode(padded)
        text = raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return text if text.translate(_TEXT_WHITESPACE).isprintable() else None


def base64_span(match: re.Match[str]) -> tuple[int, int] | None:
    """The span of a family-40 match when what it encodes is a credential, else None."""
    run = match.group("secret")
    if len(run) > _BASE64_MAX_CHARS:
        return None
    text = _base64_text(run)
    if text is None:
        return None
    if _USER_PASSWORD.fullmatch(text) or _holds_secret(text):
        return match.span("secret")
    return None


def _holds_secret(text: str) -> bool:
    """Whether any built-in family finds a secret in ``text`` (a decoded one: shorter
    than the run it came from, so a secret encoded twice is found too, and ends)."""
    folded = text.casefold()
    for pattern, gate, check in _plans():
        if gate is not None and not gate.admits(text, folded):
            continue
        if any(check is None or check(found) is not None for found in pattern.finditer(text)):
            return True
    return False


@functools.cache
def _plans() -> tuple[tuple[re.Pattern[str], Gate | None, _Check | None], ...]:
    """Each built-in with its gate and check, looked up once: hashing a pattern hashes
    its whole source, which costs more than most gates."""
    return tuple((p, PREFILTERS.get(p), MATCH_CHECKS.get(p)) for p in BUILTIN_PATTERNS)


def finds_secret(pattern: re.Pattern[str], text: str) -> bool:
    """Whether built-in ``pattern`` finds a secret in ``text``: a match that its check
    (``MATCH_CHECKS``), if it has one, takes."""
    check = MATCH_CHECKS.get(pattern)
    return any(check is None or check(found) is not None for found in pattern.finditer(text))


BUILTIN_PATTERNS: tuple[re.Pattern[str], ...] = (
    # Whole blocks first, then self-identifying token formats (they need no context),
    # then the context rules, which then see "[REDACTED]" as the value and leave it.
    PEM_PRIVATE_KEY,
    JWT,
    # Before the token families: they would take the first line or the part before an
    # entity alone and leave the rest (families 37 and 38).
    SPLIT_PREFIXED_TOKEN,
    DISGUISED_PREFIXED_TOKEN,
    API_SECRET_KEY,
    GITHUB_TOKEN,
    GITLAB_TOKEN,
    NPM_TOKEN,
    HUGGING_FACE_TOKEN,
    SENDGRID_KEY,
    DOCKER_TOKEN,
    SHOPIFY_TOKEN,
    TWILIO_API_KEY,
    LINEAR_KEY,
    # Before the key id: it reads the id as its context (family 23).
    AWS_SECRET_KEY_NEAR_ID,
    AWS_SECRET_KEY_AFTER_WORD,
    AWS_SECRET_KEY_BEFORE_WORD,
    AWS_ACCESS_KEY_ID,
    AWS_SESSION_TOKEN,
    GOOGLE_KEY,
    META_TOKEN,
    TELEGRAM_BOT_TOKEN,
    PIT_TOKEN,
    SLACK_TOKEN,
    AI_MEMORY_TOKEN,
    BEARER_TOKEN,
    SLACK_WEBHOOK_URL,
    URL_CREDENTIALS,
    URL_TOKEN_PARAMETER,
    AZURE_CONNECTION_SECRET,
    AUTH_HEADER,
    NPMRC_AUTH,
    PROVIDER_ENV_ASSIGNMENT,
    SECRET_ASSIGNMENT,
    CREDENTIAL_ASSIGNMENT,
    CREDENTIAL_ON_NEXT_LINE,
    MYSQL_PASSWORD_FLAG,
    REGISTRY_LOGIN_PASSWORD,
    CURL_USER_PASSWORD,
    # After the context rules, which take a base64 value whole with its name (an
    # "Authorization: Basic" header, an .npmrc "_auth").
    BASE64_CREDENTIAL,
    CREDENTIAL_PATH,
)

# Fast gates: literals of which every match of the pattern contains one, looked for with
# plain substring tests (far faster than any regex scan, and than a case-insensitive
# regex most of all), so the common message with no secret costs a few substring tests
# instead of thirty full regex passes. A case-insensitive gate compares case-folded text,
# which folds at least what the pattern's IGNORECASE folds ("ſ" is "s", "K" is "k").


@dataclass(frozen=True)
class Gate:
    """Literals one of which every text contains that a pattern finds a secret in
    (``finds_secret``).

    ``line_break``: every match also holds a line break, so a text without one is
    skipped. ``joined``: the literals are looked for, case and all, in the text with its
    line breaks taken out (``lines_joined``), where a prefix that a break split is whole
    again.
    """

    literals: tuple[str, ...]
    ignore_case: bool = False
    line_break: bool = False
    joined: bool = False

    def admits(self, text: str, folded: str) -> bool:
        """Whether the pattern may match ``text`` (``folded`` is ``text.casefold()``)."""
        if self.line_break and "\n" not in text:
            return False
        if self.joined:
            return any(literal in lines_joined(text) for literal in self.literals)
        haystack = folded if self.ignore_case else text
        return any(literal in haystack for literal in self.literals)

    def search(self, text: str) -> bool:
        return self.admits(text, text.casefold() if self.ignore_case else text)

    @property
    def pattern(self) -> str:
        return " | ".join(self.literals)


def _gate(
    *literals: str, ignore_case: bool = False, line_break: bool = False, joined: bool = False
) -> Gate:
    folded = tuple(lit.casefold() if ignore_case else lit for lit in literals)
    return Gate(folded, ignore_case, line_break, joined)


def lines_joined(text: str) -> str:
    """``text`` without its line breaks (and the indentation and continuing backslash
    that go with them): where family 37's gate looks for a prefix a break split.

    Plain string replacements first, and then a pattern that starts with the newline
    itself, which the ``re`` module finds fast: ``LINE_BREAK`` would cost ten times as
    much. A carriage return elsewhere goes too, which can only let the gate admit more.
    """
    if "\n" not in text:
        return text
    if "\r" in text:
        text = text.replace("\r", "")
    if "\\" in text:
        text = text.replace("\\\n", "\n")
    return _NEWLINE_AND_INDENT.sub("", text)


_NEWLINE_AND_INDENT = re.compile(r"\n[ \t]*+")


PREFILTERS: dict[re.Pattern[str], Gate] = {
    PEM_PRIVATE_KEY: _gate("PRIVATE KEY"),
    JWT: _gate("eyJ"),
    API_SECRET_KEY: _gate("sk-", "k_live_", "k_test_"),
    GITHUB_TOKEN: _gate("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    GITLAB_TOKEN: _gate(
        *(f"gl{kind}-" for kind in ("pat", "dt", "rt", "ptt", "oas", "cbt", "ft", "soat", "imt")),
        "glagent-",
    ),
    NPM_TOKEN: _gate("npm_"),
    HUGGING_FACE_TOKEN: _gate("hf_"),
    SENDGRID_KEY: _gate("SG."),
    DOCKER_TOKEN: _gate("dckr_"),
    SHOPIFY_TOKEN: _gate("shp"),
    TWILIO_API_KEY: _gate("SK"),
    LINEAR_KEY: _gate("lin_"),
    # Every split token holds a break and, with its breaks taken out, a whole prefix;
    # every disguised one has an escape or an entity.
    SPLIT_PREFIXED_TOKEN: _gate(
        *dict.fromkeys(spelling for token in _PREFIXED_TOKENS for spelling in token.spellings),
        line_break=True,
        joined=True,
    ),
    DISGUISED_PREFIXED_TOKEN: _gate("%", "&"),
    AWS_SECRET_KEY_AFTER_WORD: _gate("aws", "secret", ignore_case=True),
    AWS_SECRET_KEY_BEFORE_WORD: _gate("aws", "secret", ignore_case=True),
    AWS_SECRET_KEY_NEAR_ID: _gate("AKIA", "ASIA"),
    AWS_ACCESS_KEY_ID: _gate("AKIA", "ASIA"),
    AWS_SESSION_TOKEN: _gate("IQoJb3JpZ2lu", "FwoGZXIvYXdz", "FQoGZXIvYXdz"),
    GOOGLE_KEY: _gate("AIza", "1//"),
    META_TOKEN: _gate("EAA"),
    # Every token has the colon between the bot id and the secret.
    TELEGRAM_BOT_TOKEN: _gate(":"),
    PIT_TOKEN: _gate("pit-"),
    SLACK_TOKEN: _gate("xox", "xapp-"),
    AI_MEMORY_TOKEN: _gate("aim_"),
    BEARER_TOKEN: _gate("bearer", ignore_case=True),
    SLACK_WEBHOOK_URL: _gate("hooks.slack.com/"),
    URL_CREDENTIALS: _gate("://"),
    URL_TOKEN_PARAMETER: _gate("token=", "key=", "signature=", ignore_case=True),
    AZURE_CONNECTION_SECRET: _gate("accountkey", "sharedaccess", "sig=", ignore_case=True),
    AUTH_HEADER: _gate("authorization", "key", "token", "cookie", ignore_case=True),
    NPMRC_AUTH: _gate("_auth", "_password", "npmAuth"),
    PROVIDER_ENV_ASSIGNMENT: _gate("key", "token", "password", "pwd", ignore_case=True),
    SECRET_ASSIGNMENT: _gate("_KEY", "_TOKEN", "_SECRET", "_PASSWORD", "_CREDENTIAL"),
    CREDENTIAL_ASSIGNMENT: _gate("pass", "pwd", "secret", "token", ignore_case=True),
    CREDENTIAL_ON_NEXT_LINE: _gate(
        "pass",
        "pwd",
        "secret",
        "token",
        "key",
        "credential",
        "authorization",
        ignore_case=True,
        line_break=True,
    ),
    MYSQL_PASSWORD_FLAG: _gate("mysql", "mariadb"),
    REGISTRY_LOGIN_PASSWORD: _gate("login"),
    CURL_USER_PASSWORD: _gate("curl"),
    CREDENTIAL_PATH: _gate(".ssh", ".aws", ".kube", ".gnupg", "gcloud"),
}

# Checks a match must pass before it is redacted, for what a regex cannot say: each
# answers the span to redact, or None when the match holds no secret.
MATCH_CHECKS: dict[re.Pattern[str], _Check] = {
    SPLIT_PREFIXED_TOKEN: split_token_span,
    CREDENTIAL_ON_NEXT_LINE: name_before_span,
    BASE64_CREDENTIAL: base64_span,
}
