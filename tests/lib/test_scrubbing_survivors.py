"""The kinds of secret that once survived the scrubber, planted with generated values.

A security probe planted secrets of these kinds and found them stored as sent: a bare
AWS secret key beside the words "aws" or "secret", "passwd: x", "curl -u user:password",
Shopify, Twilio and Linear keys, tokens in URL query parameters, invisible characters the
scrubber did not yet remove, a token split over two lines, a URL-encoded token prefix
and an HTML entity inside a token. Each kind has one test here, which plants generated
values in the ways tools and people write them and expects exactly one redaction with
the rest of the line kept; each kind's ordinary look-alikes must come through unchanged.

Values are generated (hypothesis, a bounded and reproducible set of examples), so no
real-looking credential sits in the repository for a secret scanner to flag.
"""

from __future__ import annotations

import base64
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aimemory_site.lib.scrubbing import REDACTED, scrubber_builtin

PROPERTY = settings(max_examples=40, derandomize=True, database=None, deadline=None)

ALNUM = string.ascii_letters + string.digits
BASE64 = ALNUM + "+/"
BASE64URL = ALNUM + "_-"
HEX = "0123456789abcdef"
# Password-like values: a digit first, no letter of "pw", "pass", "secret" or "token" (a
# value named like a credential reads as code), and some punctuation.
PASSWORD_CHARS = string.digits + "ABCDFGHJKMNQRUVXYZabcdfghjkmnqruvxyz!#^"

scrubber = scrubber_builtin()


def run(alphabet: str, low: int, high: int | None = None) -> st.SearchStrategy[str]:
    """A run of ``low``..``high`` characters of ``alphabet`` (exactly ``low`` if no high)."""
    return st.text(st.sampled_from(alphabet), min_size=low, max_size=high or low)


def password() -> st.SearchStrategy[str]:
    return st.builds(str.__add__, run(string.digits, 1), run(PASSWORD_CHARS, 7, 20))


def assert_redacted_once(template: str, secret: str, **parts: str) -> None:
    """``template`` with ``secret`` planted scrubs to the template with one marker."""
    text = template.format(secret=secret, **parts)
    scrubbed, redactions = scrubber.scrub_counted(text)
    assert scrubbed == template.format(secret=REDACTED, **parts), text
    assert redactions == 1


def assert_kept(text: str) -> None:
    assert scrubber.scrub_counted(text) == (text, 0)


# --- A bare AWS secret access key beside "aws" or "secret" -------------------------------


def _is_aws_secret_shaped(key: str) -> bool:
    # What any random base64 key of 40 characters is, bar one in a few hundred.
    return (
        any(c.isupper() for c in key)
        and any(c.islower() for c in key)
        and any(c.isdigit() or c in "+/" for c in key)
        and key.count("/") <= 2
    )


aws_secret_keys = run(BASE64, 40).filter(_is_aws_secret_shaped)

AWS_SECRET_IN_PROSE = [
    "the aws secret key is {secret}",
    "here is the secret {secret} for prod",
    "{secret} is the AWS secret for staging",
    "aws key {secret} (rotate monthly)",
    "New AWS credentials for the ci user, {secret}.",
    "Secret access key {secret}",
    "secret\t{secret}",
]


@PROPERTY
@given(key=aws_secret_keys, template=st.sampled_from(AWS_SECRET_IN_PROSE))
def test_bare_aws_secret_key_beside_aws_or_secret_is_redacted(key: str, template: str) -> None:
    assert_redacted_once(template, key)


@pytest.mark.parametrize(
    "text",
    [
        "the aws fix landed in 3f2a9c8e1b7d4f6a0c5e2b9d8a7f6e5d4c3b2a19, secret rotation next",
        "The AWS secret access key is shown only once, when the key is created.",
        "the secret handler is AwsSecretsManagerCredentialsProviderImpl now",
        "aws s3 sync /srv/Assets/Build2024/Release/Web/Images s3://acme/assets",
        "secret 9b2f4c1e-7a3d-4e5f-8a6b-1c2d3e4f5a6b was rotated",
        '<img alt="aws secret flow" src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAA'
        'BCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==">',
        "aws sha256 digest n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg= for the secret layer",
    ],
)
def test_aws_and_secret_words_alone_keep_the_line(text: str) -> None:
    assert_kept(text)


# --- passwd ---------------------------------------------------------------------------

PASSWD_LINES = [
    "passwd: {secret}",
    "user: deploy\npasswd: {secret}\nhost: db.internal",
    "login bob, passwd: {secret}",
    "  passwd: '{secret}'",
    "PASSWD: {secret}",
    "passwd={secret}",
]


@PROPERTY
@given(secret=password(), template=st.sampled_from(PASSWD_LINES))
def test_passwd_value_is_redacted(secret: str, template: str) -> None:
    assert_redacted_once(template, secret)


@pytest.mark.parametrize(
    "text",
    [
        "passwd:         files systemd",
        "passwd: compat",
        "passwd: files sss",
        "passwd: password updated successfully",
        "passwd: all authentication tokens updated successfully.",
        "passwd: Authentication token manipulation error",
        "passwd: user 'bob' does not exist",
        "cat: /etc/passwd: Permission denied",
        "the passwd field of /etc/shadow",
        '(define fields (list "passwd:name" "passwd:gecos" "passwd:shell"))',
    ],
)
def test_passwd_in_system_output_is_kept(text: str) -> None:
    assert_kept(text)


# --- curl -u user:password --------------------------------------------------------------

CURL_COMMANDS = [
    "curl -u {user}:{secret} https://api.example.com/v1/items",
    "curl --user {user}:{secret} -X POST https://api.example.com/hook",
    "curl -s -u '{user}:{secret}' https://ci.example.com/job/build",
    "curl -fsSL -H 'Accept: application/json' --user \"{user}:{secret}\" https://x.example.com",
    "curl -u{user}:{secret} https://x.example.com",
    "curl --proxy-user {user}:{secret} -x http://proxy:3128 https://x.example.com",
    "curl -U {user}:{secret} -x http://proxy:3128 https://x.example.com",
    "curl.exe -u {user}:{secret} https://x.example.com",
]


@PROPERTY
@given(
    user=run(string.ascii_lowercase, 1, 12),
    secret=password(),
    template=st.sampled_from(CURL_COMMANDS),
)
def test_curl_user_password_is_redacted(user: str, secret: str, template: str) -> None:
    assert_redacted_once(template, secret, user=user)


@pytest.mark.parametrize(
    "text",
    [
        "curl -u bob https://api.example.com/v1 (curl asks for the password)",
        "curl --negotiate -u : https://intranet.example.com/",
        'curl -u "$API_USER:$API_PASSWORD" https://api.example.com',
        "curl -u admin:${ADMIN_TOKEN} https://api.example.com",
        "curl -u user: https://api.example.com",
        "curl -X GET https://api.example.com/v1?user=bob",
        "use curl -u with a user name only",
    ],
)
def test_curl_without_a_password_is_kept(text: str) -> None:
    assert_kept(text)


# --- Shopify, Twilio and Linear keys -----------------------------------------------------

TOKEN_LINES = [
    "token {secret} for the store",
    "client = Client('{secret}', api_secret, account_sid)",
    'new Client({{ token: "{secret}" }})',
    "X-Shopify-Access-Token {secret}",
    "{secret}",
]


@PROPERTY
@given(
    prefix=st.sampled_from(["shpat_", "shpca_", "shppa_", "shpss_"]),
    body=run(HEX + "ABCDEF", 32),
    template=st.sampled_from(TOKEN_LINES),
)
def test_shopify_token_is_redacted(prefix: str, body: str, template: str) -> None:
    assert_redacted_once(template, prefix + body)


@PROPERTY
@given(body=run(HEX, 32), template=st.sampled_from(TOKEN_LINES))
def test_twilio_api_key_is_redacted(body: str, template: str) -> None:
    assert_redacted_once(template, "SK" + body)


@PROPERTY
@given(
    token=st.one_of(
        st.builds(str.__add__, st.just("lin_api_"), run(ALNUM, 40)),
        st.builds(str.__add__, st.just("lin_oauth_"), run(HEX, 64)),
    ),
    template=st.sampled_from(TOKEN_LINES),
)
def test_linear_key_is_redacted(token: str, template: str) -> None:
    assert_redacted_once(template, token)


@pytest.mark.parametrize(
    "text",
    [
        "See the SKU list: SKU-12345, SKETCH and SK0123 (too short).",
        "shpat_ tokens are Admin API tokens; lin_api_ keys are personal.",
        "TASK" + "0123456789abcdef" * 2 + " is a task id",
        "shpat_0123456789abcdef is cut short",
        "lin_api_short and linear_api_key",
    ],
)
def test_token_prefixes_alone_are_kept(text: str) -> None:
    assert_kept(text)


# --- Tokens in URL query parameters ------------------------------------------------------

QUERY_URLS = [
    "https://graph.example.com/me?fields=id,name&{name}={secret}",
    "https://api.example.com/v1/items?{name}={secret}",
    "wss://stream.example.com/socket?{name}={secret}&v=2",
    '<a href="https://app.example.com/export?{name}={secret}&amp;format=csv">export</a>',
    "https://app.example.com/callback#{name}={secret}&token_type=bearer&expires_in=3600",
    "[download](https://files.example.com/f/12?{name}={secret})",
]
QUERY_NAMES = [
    "access_token",
    "refresh_token",
    "id_token",
    "auth_token",
    "token",
    "api_key",
    "apikey",
    "api-key",
    "private_token",
    "X-Amz-Signature",
    "X-Amz-Security-Token",
    "X-Goog-Signature",
]


@PROPERTY
@given(
    name=st.sampled_from(QUERY_NAMES),
    secret=run(BASE64URL + ".~%", 16, 60).filter(lambda v: v[0] not in "-%"),
    template=st.sampled_from(QUERY_URLS),
)
def test_token_in_a_url_query_parameter_is_redacted(name: str, secret: str, template: str) -> None:
    assert_redacted_once(template, secret, name=name)


@pytest.mark.parametrize(
    "text",
    [
        "https://example.com/callback?token=<token>&state=x",
        "https://example.com/callback?access_token={token}",
        "url = f'{base}/me?access_token={token}'",
        "fetch(`/api?access_token=${token}`)",
        'url = base + "?access_token=" + token',
        "https://example.com/reset?token=short",
        "https://example.com/search?q=token&sort=asc",
        "https://example.com/a?monkey=bananas12345&turkey_token_count=12",
    ],
)
def test_query_parameters_without_a_token_are_kept(text: str) -> None:
    assert_kept(text)


# --- Invisible characters inside a token -------------------------------------------------

NEWLY_INVISIBLE = [
    "\u034f",  # combining grapheme joiner
    "\u061c",  # Arabic letter mark
    "\u180e",  # Mongolian vowel separator
    "\u200e",  # left-to-right mark
    "\u200f",  # right-to-left mark
    "\u202a",  # left-to-right embedding
    "\u202e",  # right-to-left override
    "\u2061",  # function application
    "\u2062",  # invisible times
    "\u2063",  # invisible separator
    "\u2064",  # invisible plus
    "\u2066",  # left-to-right isolate
    "\u2069",  # pop directional isolate
    "\ufe0f",  # variation selector-16, after an ASCII character
    "\U000e0001",  # language tag
    "\U000e0041",  # tag latin capital letter A
    "\U000e007f",  # cancel tag
]
ghp_tokens = st.builds(str.__add__, st.sampled_from(["ghp_", "gho_", "ghs_"]), run(ALNUM, 36))


@PROPERTY
@given(
    token=ghp_tokens,
    hidden=st.lists(st.sampled_from(NEWLY_INVISIBLE), min_size=1, max_size=3).map("".join),
    cut=st.integers(1, 39),
)
def test_invisible_character_inside_a_token_is_removed(token: str, hidden: str, cut: int) -> None:
    text = f"token {token[:cut]}{hidden}{token[cut:]} ok"
    assert scrubber.scrub_counted(text) == ("token [REDACTED] ok", 1)


@pytest.mark.parametrize(
    "text",
    [
        "I \u2764\ufe0f this, \u2603\ufe0e too",  # emoji and text presentation
        "press 1\ufe0f\u20e3 then #\ufe0f\u20e3",  # keycaps
        "\u0600\u0661\u0662 and \u06dd\u0661",  # Arabic signs that enclose digits
        "\u845b\U000e0100 in a name",  # an ideographic variation sequence
        "\u1820\u180b\u1821 in Mongolian",  # a free variation selector
        "\U0001d15f\U0001d173\U0001d15f\U0001d17a notes",  # musical beams
    ],
)
def test_prose_with_visible_format_sequences_is_kept(text: str) -> None:
    assert_kept(text)


# --- Known-prefix token split over two lines ---------------------------------------------

# Self-identifying tokens as their services issue them: (prefix, alphabet, length, and
# how far into the body a line break can fall for the scrubber to know the token goes on:
# the whole length for tokens of a fixed length, else the shortest token it redacts).
PREFIXED_TOKENS = [
    ("ghp_", ALNUM, 36, 36),
    ("gho_", ALNUM, 36, 36),
    ("github_pat_", ALNUM + "_", 82, 22),
    ("glpat-", BASE64URL, 20, 20),
    ("npm_", ALNUM, 36, 36),
    ("hf_", ALNUM, 34, 34),
    ("dckr_pat_", BASE64URL, 27, 27),
    ("sk-", BASE64URL, 48, 20),
    ("sk_live_", ALNUM, 24, 16),
    ("xoxb-", ALNUM + "-", 40, 10),
    ("aim_", BASE64URL, 43, 32),
    ("shpat_", HEX, 32, 32),
    ("lin_api_", ALNUM, 40, 40),
    ("AIza", BASE64URL, 35, 35),
    ("SK", HEX, 32, 32),
]
prefixed_tokens = st.sampled_from(PREFIXED_TOKENS).flatmap(
    lambda spec: st.tuples(st.just(spec[0]), run(spec[1], spec[2]), st.integers(0, spec[3] - 1))
)


@PROPERTY
@given(
    token=prefixed_tokens,
    newline=st.sampled_from(["\n", "\r\n", "\n  ", "\n\t"]),
)
def test_token_split_over_two_lines_is_redacted(token: tuple[str, str, int], newline: str) -> None:
    prefix, body, at = token
    assert_redacted_once(
        "push with {secret} and report back", prefix + body[:at] + newline + body[at:]
    )


@pytest.mark.parametrize(
    "text",
    [
        "ghp_ tokens\nare classic tokens",
        "pip install sk-learn\nnumpy scipy",
        "the prefix is ghp_\nand the rest is random",
        "import hf_hub_download\nmodel_name_or_path_for_the_tokenizer = x",
        "see SK01\n23456789abcdef0123456789abcdef01234567",
        "xoxb-token\nxoxo-hugs",
    ],
)
def test_prefix_at_a_line_end_is_kept(text: str) -> None:
    assert_kept(text)


# --- URL-encoded token prefix --------------------------------------------------------------


def _url_encoded(prefix: str, body: str, upper: bool) -> str:
    escape = {"_": "%5F", "-": "%2D"} if upper else {"_": "%5f", "-": "%2d"}
    return "".join(escape.get(c, c) for c in prefix) + body


@PROPERTY
@given(
    token=prefixed_tokens.filter(lambda t: "_" in t[0] or "-" in t[0]),
    upper=st.booleans(),
    template=st.sampled_from(
        [
            "https://ci.example.com/hooks/{secret}/run",
            "redirect to https://x.example.com/login?next=%2F&t={secret}",
            "log: {secret}",
        ]
    ),
)
def test_url_encoded_token_prefix_is_redacted(
    token: tuple[str, str, int], upper: bool, template: str
) -> None:
    prefix, body, _ = token
    assert_redacted_once(template, _url_encoded(prefix, body, upper))


@pytest.mark.parametrize(
    "text",
    [
        "file%5Fname.txt and a%2Db and 50% off",
        "https://example.com/search?q=ghp%5F&page=2",
        "sk%2Dlearn is scikit-learn",
    ],
)
def test_url_encoded_text_without_a_token_is_kept(text: str) -> None:
    assert_kept(text)


# --- HTML entity inside a token --------------------------------------------------------------

INVISIBLE_ENTITIES = [
    "&#8203;",
    "&#x200B;",
    "&#x200b;",
    "&#173;",
    "&#xAD;",
    "&#8288;",
    "&#65279;",
    "&#x2063;",
    "&zwnj;",
    "&zwj;",
    "&shy;",
    "&lrm;",
    "&ZeroWidthSpace;",
    "&NoBreak;",
    "&InvisibleComma;",
]


@PROPERTY
@given(
    token=prefixed_tokens,
    entity=st.sampled_from(INVISIBLE_ENTITIES),
    cut=st.floats(0, 1, exclude_max=True),
    template=st.sampled_from(["see {secret} now", "<code>{secret}</code>", "<p>key: {secret}</p>"]),
)
def test_html_entity_inside_a_token_is_redacted(
    token: tuple[str, str, int], entity: str, cut: float, template: str
) -> None:
    prefix, body, _ = token
    at = int(cut * len(body))
    assert_redacted_once(template, prefix + body[:at] + entity + body[at:])


@pytest.mark.parametrize(
    "text",
    [
        "Tom &amp; Jerry &#8203; and &nbsp; and &zwnj; in prose",
        "<p>sk-learn&#8203;is a library</p>",
        "ghp_&amp;gho_ are GitHub prefixes",
        "a&#8203;b&#8203;c",
    ],
)
def test_html_entities_in_prose_are_kept(text: str) -> None:
    assert_kept(text)


# --- Third review: a secret broken anywhere across lines ----------------------------------

# A line break as terminals, editors and shells write one: plain, indented, or a shell or
# Python line continued with a backslash.
LINE_BREAKS = ["\n", "\r\n", "\n  ", "\n\t", "\\\n", "\\\n    "]
# A format the second review did not split: AWS access key ids.
MORE_PREFIXED_TOKENS = [
    ("AKIA", string.ascii_uppercase + string.digits, 16, 16),
    ("ASIA", string.ascii_uppercase + string.digits, 16, 16),
]
any_prefixed_token = st.sampled_from(PREFIXED_TOKENS + MORE_PREFIXED_TOKENS).flatmap(
    lambda spec: st.tuples(
        st.just(spec[0]),
        run(spec[1], spec[2]),
        # Anywhere after the first character, until the token is complete: inside the
        # prefix too.
        st.integers(1, len(spec[0]) + spec[3] - 1),
    )
)


@PROPERTY
@given(
    token=any_prefixed_token,
    newline=st.sampled_from(LINE_BREAKS),
    template=st.sampled_from(["push with {secret} and report back", "key:\n{secret}\nthanks"]),
)
def test_token_broken_anywhere_is_redacted(
    token: tuple[str, str, int], newline: str, template: str
) -> None:
    prefix, body, cut = token
    whole = prefix + body
    assert_redacted_once(template, whole[:cut] + newline + whole[cut:])


# Formats of a fixed length, which a terminal or an editor may wrap over many lines.
FIXED_LENGTH_TOKENS = [
    ("ghp_", ALNUM, 36),
    ("github_pat_", ALNUM + "_", 82),
    ("npm_", ALNUM, 36),
    ("aim_", BASE64URL, 43),
    ("lin_api_", ALNUM, 40),
    ("AKIA", string.ascii_uppercase + string.digits, 16),
]


@PROPERTY
@given(
    token=st.sampled_from(FIXED_LENGTH_TOKENS).flatmap(
        lambda spec: st.builds(str.__add__, st.just(spec[0]), run(spec[1], spec[2]))
    ),
    width=st.integers(3, 24),
    newline=st.sampled_from(LINE_BREAKS),
    template=st.sampled_from(["push with {secret} and report back", "{secret}\nand report back"]),
)
def test_token_wrapped_over_many_lines_is_redacted(
    token: str, width: int, newline: str, template: str
) -> None:
    wrapped = newline.join(token[i : i + width] for i in range(0, len(token), width))
    assert_redacted_once(template, wrapped)


NEXT_LINE_CREDENTIALS = [
    "password:\n{secret}",
    "db:\n  password:\n    {secret}\n  host: db.internal",
    "DB_PASSWORD=\\\n  {secret}",
    'password = \\\n    "{secret}"',
    '{{"password":\n  "{secret}",\n  "user": "deploy"}}',
    "**Password:**\n`{secret}`",
    "secret_key: |\n  {secret}\nregion: eu-west-1",
    "client_secret:\n\t'{secret}'\n",
    "export API_TOKEN=\\\n{secret}",
    "Authorization: Bearer\n  {secret}",
    "Authorization:\n  Basic {secret}",
]


@PROPERTY
@given(secret=password(), template=st.sampled_from(NEXT_LINE_CREDENTIALS))
def test_credential_on_the_line_after_its_name_is_redacted(secret: str, template: str) -> None:
    assert_redacted_once(template, secret)


@pytest.mark.parametrize(
    "text",
    [
        # YAML, OpenAPI and Kubernetes: the next line is a key, a list, a reference.
        "password:\n  required: true\n  minLength: 12",
        "password:\n  $ref: '#/components/schemas/Password'",
        "secret:\n  secretKeyRef:\n    name: db",
        "password:\n  - must be 12 characters",
        "password:\n{{ vault_db_password }}",
        "Password:\n********",
        "password:\n\nnext section",
        # Docstrings and code.
        "Args:\n    password:\n        The user's password.\n",
        "Returns:\n    secret:\n        str",
        '"password":\n    os.environ["DB_PASSWORD"],',
        "token:\n  None",
        "def check(password):\n    return hash(password)",
        "if best is not None and key >= best_key:\n    continue",
        "    if not self.token:\n        return",
        "for raw_key in body:\n    if raw_key == _BASE_KEY:\n        continue",
        "password:\n  #\nsecret:\n  #todo",
        "API_KEY=\\\n  ${API_KEY}",
        # Terminals and prose.
        "Enter password:\nWelcome to the MySQL monitor.",
        "[sudo] password for bob:\nSorry, try again.",
        "Authorization:\n  see the gateway docs",
        "password_reset:\n  enabled",
        # Token look-alikes at line ends.
        "ghp_ tokens\nare classic tokens",
        "g\nhp_is_a_prefix",
        "Vitamin E\nAAA batteries",
        "plan A\nKIA motors",
        "ask\n-learn more at sklearn.org",
        "pip install sk-learn\nnumpy scipy",
        "xoxb-token\nxoxo-hugs",
        "see SK01\n23456789abcdef0123456789abcdef01234567",
        "the quick brown\nfox jumps over\nthe lazy dog",
        "3f2a9c8e1b7d4f6a\n0c5e2b9d8a7f6e5d4c3b2a19",
        "iVBORw0KGgoAAAANSUhEUg\nAAAAEAAAABCAYAAAAfFcSJ",
        "GITHUB_USER=octocat\nGITHUB_REPO=hello-world",
    ],
)
def test_lines_that_only_look_split_are_kept(text: str) -> None:
    assert_kept(text)


# --- Third review: credentials wrapped in base64 -------------------------------------------


def _base64(text: str, *, urlsafe: bool = False, padded: bool = True) -> str:
    raw = text.encode()
    encoded = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(raw).decode()
    return encoded if padded else encoded.rstrip("=")


BASE64_LINES = [
    "creds: {secret}",
    "echo {secret} | base64 -d",
    '{{"auths": {{"registry.example.com": {{"auth": "{secret}"}}}}}}',
    "Basic auth for the staging proxy is {secret}, rotate it monthly.",
    "auth={secret}&next=/home",
    "{secret}",
]


@PROPERTY
@given(
    user=run(string.ascii_lowercase + ".", 1, 12).filter(lambda u: u[0] != "."),
    secret=password(),
    urlsafe=st.booleans(),
    padded=st.booleans(),
    template=st.sampled_from(BASE64_LINES),
)
def test_base64_of_user_and_password_is_redacted(
    user: str, secret: str, urlsafe: bool, padded: bool, template: str
) -> None:
    assert_redacted_once(template, _base64(f"{user}:{secret}", urlsafe=urlsafe, padded=padded))


@PROPERTY
@given(token=prefixed_tokens, template=st.sampled_from(BASE64_LINES))
def test_base64_of_a_known_token_is_redacted(token: tuple[str, str, int], template: str) -> None:
    prefix, body, _ = token
    assert_redacted_once(template, _base64(prefix + body))


@PROPERTY
@given(secret=password(), template=st.sampled_from(BASE64_LINES))
def test_base64_of_a_credential_line_is_redacted(secret: str, template: str) -> None:
    assert_redacted_once(template, _base64(f"DB_PASSWORD={secret}\nDB_HOST=db.internal\n"))


# A 1x1 PNG, as an image pasted into Markdown or HTML is encoded.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


@pytest.mark.parametrize(
    "text",
    [
        f"![pixel](data:image/png;base64,{PNG})",
        f'<img src="data:image/png;base64,{PNG}">',
        f"the README, encoded: {_base64('Hello, world! This is a plain sentence.')}",
        "config: " + _base64('{"name": "demo", "version": 2}'),
        f"link: {_base64('https://example.com/docs/intro')}",
        f"host: {_base64('localhost:8080')}",
        f"at {_base64('12:30:45')}",
        f"digest {_base64('sha256:' + '3f2a9c8e1b7d4f6a0c5e2b9d8a7f6e5d')}",
        "sha256 n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg= of the layer",
        "commit 3f2a9c8e1b7d4f6a0c5e2b9d8a7f6e5d4c3b2a19 fixed it",
        "request 9b2f4c1e-7a3d-4e5f-8a6b-1c2d3e4f5a6b failed",
        "class AbstractSingletonProxyFactoryBean extends BaseConfigurationBean",
        "def test_scrubbing_survivors_keep_ordinary_base64_lines(): pass",
        "internationalization and implementation_details_here",
        "---------------------------------------------------------------",
        'ETag: W/"c2VydmVyLXNpZGUtZXRhZy12YWx1ZQ"',
        "integrity sha512-dGhpcyBpcyBub3QgYSByZWFsIGludGVncml0eSBoYXNo== checked",
    ],
)
def test_ordinary_base64_and_hashes_are_kept(text: str) -> None:
    assert_kept(text)
