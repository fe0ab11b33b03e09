"""Properties of the secret scrubber, over generated text (hypothesis).

Scrubbing is idempotent, adds nothing but markers, leaves text without secrets alone,
and never lets a generated secret of any built-in family through, wherever it sits in
the text and wherever the cap cuts it. The secrets are built from each pattern's shape
(prefix, alphabet, length) at run time, so no real-looking credential sits in the
repository for a secret scanner to flag.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from aimemory_site.lib.errors import BadRequest, Code
from aimemory_site.lib.limits import truncation_marker
from aimemory_site.lib.scrubbing import (
    INVISIBLE_CHARACTERS,
    REDACTED,
    invisible_removed,
    scrubber_builtin,
    text_clean,
)

# Bounded and reproducible: the same examples every run, and no example database
# written into the checkout.
PROPERTY = settings(max_examples=60, derandomize=True, database=None, deadline=None)

ALNUM = string.ascii_letters + string.digits
BASE64URL = ALNUM + "_-"
BASE64 = ALNUM + "+/"
UPPER_DIGITS = string.ascii_uppercase + string.digits
# Values for the context rules (passwords, CLI flags, header values): a digit first and
# no letter of "pw", "pass", "secret" or "token", so no value reads as code (a variable
# named like a credential, a dotted path, a type) which those rules rightly keep.
VALUE = string.digits + "ABCDFGHJKMNQRUVXYZ"

scrubber = scrubber_builtin()


def run(alphabet: str, low: int, high: int | None = None) -> st.SearchStrategy[str]:
    """A run of ``low``..``high`` characters of ``alphabet`` (exactly ``low`` if no high)."""
    return st.text(st.sampled_from(alphabet), min_size=low, max_size=high or low)


def value() -> st.SearchStrategy[str]:
    return st.builds(str.__add__, run(string.digits, 1), run(VALUE, 7, 24))


@dataclass(frozen=True)
class Planted:
    """A text carrying one secret, and the part of it that must never come out."""

    text: str
    secret: str


def plant(template: str, **parts: st.SearchStrategy[str]) -> st.SearchStrategy[Planted]:
    """``template`` with generated parts; the part named ``secret`` must vanish."""
    return st.fixed_dictionaries(parts).map(
        lambda drawn: Planted(template.format(**drawn), drawn["secret"])
    )


# One strategy per built-in family (aimemory_site.lib.secret_patterns), named as there.
FAMILIES: dict[str, st.SearchStrategy[Planted]] = {
    "pem_private_key": plant(
        "-----BEGIN {kind}PRIVATE KEY-----\n{secret}\n{more}\n-----END {kind}PRIVATE KEY-----",
        kind=st.sampled_from(["", "RSA ", "EC ", "OPENSSH "]),
        secret=run(BASE64, 16, 64),
        more=run(BASE64 + "=", 4, 64),
    ),
    "jwt": plant(
        "eyJ{head}.eyJ{secret}.{signature}",
        head=run(BASE64URL, 8, 30),
        secret=run(BASE64URL, 8, 40),
        signature=run(BASE64URL, 0, 40),
    ),
    "api_secret_key": plant(
        "{prefix}{secret}",
        prefix=st.sampled_from(["sk-", "sk-proj-", "sk-ant-api03-"]),
        secret=run(ALNUM, 20, 60),
    ),
    "stripe_key": plant(
        "{prefix}{secret}",
        prefix=st.sampled_from(["sk_live_", "sk_test_", "rk_live_", "rk_test_"]),
        secret=run(ALNUM, 16, 40),
    ),
    "github_token": plant(
        "gh{kind}_{secret}", kind=st.sampled_from("pousr"), secret=run(ALNUM, 36)
    ),
    "github_pat": plant("github_pat_{secret}", secret=run(ALNUM + "_", 82)),
    "gitlab_token": plant(
        "gl{kind}-{secret}",
        kind=st.sampled_from(["pat", "dt", "rt", "ptt", "oas", "cbt", "ft", "soat", "agent"]),
        secret=run(BASE64URL, 20, 30),
    ),
    "npm_token": plant("npm_{secret}", secret=run(ALNUM, 36)),
    "hugging_face_token": plant("hf_{secret}", secret=run(ALNUM, 34, 40)),
    "sendgrid_key": plant(
        "SG.{key_id}.{secret}", key_id=run(BASE64URL, 22), secret=run(BASE64URL, 43)
    ),
    "docker_token": plant(
        "dckr_{kind}_{secret}", kind=st.sampled_from(["pat", "oat"]), secret=run(BASE64URL, 27, 40)
    ),
    "aws_secret_key_near_id": plant(
        "{key_id} {secret}",
        key_id=st.builds(str.__add__, st.sampled_from(["AKIA", "ASIA"]), run(UPPER_DIGITS, 16)),
        # A random base64 key mixes cases; the rule requires it, so the plant does too.
        secret=st.builds(str.__add__, st.just("Kq"), run(BASE64, 38)),
    ),
    "aws_access_key_id": plant(
        "{prefix}{secret}",
        prefix=st.sampled_from(["AKIA", "ASIA"]),
        secret=run(UPPER_DIGITS, 16),
    ),
    "aws_session_token": plant(
        "{prefix}{secret}",
        prefix=st.sampled_from(["IQoJb3JpZ2lu", "FwoGZXIvYXdz"]),
        secret=run(BASE64 + "=%", 100, 160),
    ),
    "google_key": plant("AIza{secret}", secret=run(BASE64URL, 35)),
    "google_refresh_token": plant("1//{secret}", secret=run(BASE64URL, 30, 60)),
    "meta_token": plant("EAA{secret}", secret=run(ALNUM, 32, 80)),
    "telegram_bot_token": plant(
        "{bot}:{secret}", bot=run(string.digits, 8, 10), secret=run(BASE64URL, 30, 40)
    ),
    "pit_token": plant("pit-{secret}", secret=st.uuids().map(str)),
    "slack_token": plant(
        "{prefix}-{secret}",
        prefix=st.sampled_from(["xoxa", "xoxb", "xoxp", "xoxr", "xoxs", "xapp"]),
        secret=run(ALNUM + "-", 10, 50),
    ),
    "ai_memory_token": plant("aim_{secret}", secret=run(BASE64URL, 32, 43)),
    "bearer_token": plant(
        "{word} {secret}",
        word=st.sampled_from(["Bearer", "bearer", "BEARER"]),
        secret=run(ALNUM + "._~+/-", 16, 40),
    ),
    "slack_webhook_url": plant(
        "https://hooks.slack.com/services/T{team}/B{bot}/{secret}",
        team=run(ALNUM, 8),
        bot=run(ALNUM, 8),
        secret=run(ALNUM, 24),
    ),
    "url_credentials": plant(
        "{scheme}://{user}:{secret}@db.example.com/app",
        scheme=st.sampled_from(["https", "postgres", "redis", "amqp"]),
        user=run(string.ascii_lowercase, 1, 10),
        secret=run(ALNUM + "!$%*", 6, 24),
    ),
    "azure_connection_secret": plant(
        "DefaultEndpointsProtocol=https;AccountName={name};AccountKey={secret}==;"
        "EndpointSuffix=core.windows.net",
        name=run(string.ascii_lowercase, 3, 12),
        secret=run(BASE64, 40, 86),
    ),
    "auth_header": plant(
        "{name}: {secret}",
        name=st.sampled_from(["Authorization", "X-Api-Key", "Private-Token", "Cookie"]),
        secret=value(),
    ),
    "npmrc_auth": plant(
        "//registry.npmjs.org/:{key}={secret}",
        key=st.sampled_from(["_authToken", "_auth", "_password"]),
        secret=value(),
    ),
    "provider_env_assignment": plant(
        "{name}={secret}",
        name=st.sampled_from(["OPENAI_API_KEY", "PGPASSWORD", "hf_token", "GH_TOKEN"]),
        secret=value(),
    ),
    "secret_assignment": plant(
        "{name}{suffix}={secret}",
        name=st.sampled_from(["ACME", "MY_SERVICE", "DB"]),
        suffix=st.sampled_from(["_KEY", "_TOKEN", "_SECRET", "_PASSWORD", "_CREDENTIALS"]),
        secret=value(),
    ),
    "credential_assignment": plant(
        "{name}{separator}{secret}",
        name=st.sampled_from(["password", "db_password", "Passphrase", "client_secret", "pwd"]),
        separator=st.sampled_from(["=", ": ", ":=", " => "]),
        secret=value(),
    ),
    "mysql_password_flag": plant(
        "mysql -u root {flag}{secret} app",
        flag=st.sampled_from(["-p", "--password="]),
        secret=value(),
    ),
    "registry_login_password": plant(
        "{tool} login -u bob {flag}{secret} registry.example.com",
        tool=st.sampled_from(["docker", "podman", "helm registry"]),
        flag=st.sampled_from(["-p ", "--password ", "--password="]),
        secret=value(),
    ),
    "shopify_token": plant(
        "shp{kind}_{secret}",
        kind=st.sampled_from(["at", "ca", "pa", "ss"]),
        secret=run(string.hexdigits, 32),
    ),
    "twilio_api_key": plant("SK{secret}", secret=run("0123456789abcdef", 32)),
    "linear_key": plant(
        "lin_{kind}_{secret}", kind=st.sampled_from(["api", "oauth"]), secret=run(ALNUM, 40, 64)
    ),
    "curl_user_password": plant(
        "curl -s {flag}{user}:{secret} https://api.example.com",
        flag=st.sampled_from(["-u ", "-u", "--user ", "-U ", "--proxy-user "]),
        user=run(string.ascii_lowercase, 1, 10),
        secret=value(),
    ),
    "url_token_parameter": plant(
        "https://api.example.com/v1?{name}={secret}&v=2",
        name=st.sampled_from(["access_token", "token", "api_key", "X-Amz-Signature"]),
        secret=run(BASE64URL, 16, 60),
    ),
    "aws_secret_key_beside_word": plant(
        "{before}{secret}{after}",
        before=st.sampled_from(["aws secret key ", "the secret is ", ""]),
        after=st.sampled_from([" for AWS", ""]),
        # Mixed case, a digit, no "/" (a path-like run is kept on purpose).
        secret=st.builds(str.__add__, st.just("Kq7"), run(ALNUM + "+", 37)),
    ).filter(lambda p: "aws" in p.text.lower() or "secret" in p.text),
    "split_prefixed_token": st.builds(
        lambda body, cut, indent: Planted(
            f"ghp_{body[:cut]}\n{indent}{body[cut:]}", body[cut:] if cut < 18 else body[:cut]
        ),
        run(ALNUM, 36),
        st.integers(0, 35),
        st.sampled_from(["", "  ", "\t"]),
    ),
    "disguised_prefixed_token": plant(
        "{prefix}{head}{filler}{secret}",
        prefix=st.sampled_from(["ghp%5F", "ghp_", "npm&#95;", "npm_"]),
        head=run(ALNUM, 1, 10),
        filler=st.sampled_from(["&#8203;", "&zwnj;", "%E2%80%8B", "&#x200b;"]),
        secret=run(ALNUM, 36),
    ),
    "credential_path": plant(
        "{home}/{directory}/{secret}",
        home=st.sampled_from(["~", "/home/bob", "C:\\Users\\bob"]),
        directory=st.sampled_from([".ssh", ".aws", ".kube", ".gnupg"]),
        secret=run(string.ascii_lowercase + "_", 6, 16),
    ),
}

# Surrounding text: anything at all, set apart from the secret by a separator so it
# cannot become part of the secret's own token.
surroundings = st.text(max_size=80)
separators = st.sampled_from([" ", "\n", "\t", " (", ") ", ". "])
planted_anywhere = st.sampled_from(sorted(FAMILIES)).flatmap(lambda name: FAMILIES[name])

# Prose that holds no secret: ordinary words, digits, non-ASCII words and punctuation.
_WORDS = [
    *("the", "export", "endpoint", "streams", "NDJSON", "please", "add", "a", "test"),
    *("for", "parser", "and", "keep", "timeouts", "short", "we", "ship", "on", "Friday"),
    *("review", "done", "thanks", "naïve", "café", "straße", "東京", "данные", "résumé"),
    *("42", "3.14", "v2", "#17", "see", "issue"),
]
prose = st.lists(
    st.sampled_from(_WORDS) | st.sampled_from([".", ",", "!", "?", "(", ")", "\n", "—"]),
    max_size=60,
).map(" ".join)


def _visible(text: str) -> str:
    return invisible_removed(text)


@PROPERTY
@given(text=st.text(max_size=300) | prose)
def test_scrubbing_any_text_is_idempotent(text: str) -> None:
    once = scrubber.scrub(text)
    assert scrubber.scrub(once) == once


@PROPERTY
@given(secret=planted_anywhere, before=surroundings, after=surroundings, sep=separators)
def test_scrubbing_text_with_a_secret_is_idempotent(
    secret: Planted, before: str, after: str, sep: str
) -> None:
    once = scrubber.scrub(before + sep + secret.text + sep + after)
    assert scrubber.scrub(once) == once


@PROPERTY
@given(text=st.text(max_size=300) | prose, secret=planted_anywhere, sep=separators)
def test_scrubbing_adds_nothing_but_markers(text: str, secret: Planted, sep: str) -> None:
    for original in (text, text + sep + secret.text + sep + text):
        scrubbed = scrubber.scrub(original)
        # Each redaction turns a span of one or more characters into one marker.
        growth = len(scrubbed) - len(_visible(original))
        assert growth <= (len(REDACTED) - 1) * scrubbed.count(REDACTED)
        # Outside its markers the text is the original's, in order.
        remainder = _visible(original)
        for piece in scrubbed.split(REDACTED):
            position = remainder.find(piece)
            assert position != -1, (piece, remainder)
            remainder = remainder[position + len(piece) :]


@PROPERTY
@given(text=prose)
def test_text_without_secrets_is_unchanged(text: str) -> None:
    assert scrubber.scrub(text) == text
    assert scrubber.scrub_counted(text) == (text, 0)


@pytest.mark.parametrize("family", sorted(FAMILIES))
@settings(PROPERTY, max_examples=25)
@given(data=st.data())
def test_no_generated_secret_survives(family: str, data: st.DataObject) -> None:
    secret = data.draw(FAMILIES[family])
    before, after = data.draw(surroundings), data.draw(surroundings)
    assume(secret.secret not in before + after)
    sep = data.draw(separators)
    scrubbed, redactions = scrubber.scrub_counted(before + sep + secret.text + sep + after)
    assert secret.secret not in scrubbed
    assert redactions >= 1


@pytest.mark.parametrize("family", sorted(FAMILIES))
@settings(PROPERTY, max_examples=10)
@given(data=st.data())
def test_a_secret_cut_by_the_cap_leaves_no_fragment(family: str, data: st.DataObject) -> None:
    secret = data.draw(FAMILIES[family])
    before = data.draw(prose)
    text = f"{before} {secret.text} tail"
    start = text.index(secret.secret)
    # A cap anywhere inside the secret: scrubbing first means no prefix of it is kept.
    cap = data.draw(st.integers(start + 4, start + len(secret.secret) - 1))
    fragment = secret.secret[: cap - start]
    assume(text.count(fragment) == 1)
    clean = text_clean(text, cap=cap, label="message body")
    kept = clean.text.removesuffix(truncation_marker("message body", clean.omitted))
    assert fragment not in kept
    assert clean.redactions >= 1


@PROPERTY
@given(text=st.text(st.sampled_from(" \t\n\r\x0b\x0c\x85\u2028\u3000" + INVISIBLE_CHARACTERS)))
def test_a_body_of_only_blank_and_invisible_characters_is_refused(text: str) -> None:
    with pytest.raises(BadRequest) as refused:
        text_clean(text, cap=8000, label="message body")
    assert refused.value.code == Code.EMPTY_BODY
