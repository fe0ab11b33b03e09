"""Secret scrubbing: the built-in patterns, idempotency, scrub-then-cap and [sanitize].

Fake secrets are assembled from pieces at run time so that secret scanners reading the
repository do not mistake the fixtures for leaked credentials.
"""

from __future__ import annotations

import base64
import random
import re
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from pytest_django.fixtures import Settings as SettingsWrapper

from aimemory_site.lib import secret_patterns
from aimemory_site.lib.limits import text_cap
from aimemory_site.lib.scrubbing import (
    BUILTIN_PATTERNS,
    PREFILTERS,
    REDACTED,
    Scrubber,
    scrubber_builtin,
    scrubber_configured,
)
from aimemory_site.lib.secret_patterns import PROVIDER_ENV_ASSIGNMENT, finds_secret

ALNUM36 = "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC2eF4hJ6"
GHP = "ghp" + "_" + ALNUM36
GITHUB_PAT = "github" + "_pat_" + "11ABCDEFG0123456789abc" + "_" + "x7" * 29 + "q"
OPENAI = "sk" + "-proj-" + "Xy12" * 12
ANTHROPIC = "sk" + "-ant-api03-" + "Ab9_" * 10
STRIPE_LIVE = "sk" + "_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
STRIPE_RESTRICTED = "rk" + "_live_" + "51H8xYzAbCdEfGhIjKlMn0pQ"
STRIPE_TEST = "sk" + "_test_" + "26PHem9AhJZvU623DfE1x4sd"
AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"
AWS_TEMP_KEY = "ASIA" + "Q3EGRJ7XKZ4WNTPL"
GOOGLE_API = "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"
GOOGLE_REFRESH = "1/" + "/0gdTvVd9hQ8kZCgYIARAAGBASNwF-L9IrXyZ1a2b3c4d5e6f7g8h9i0j"
META = "EAA" + "BwzLixnjYBO" + "ZCZD" * 25
TELEGRAM = "110201543" + ":" + "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0"
PIT = "pit" + "-6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b"
SLACK_BOT = "xoxb" + "-263594206564-2343594206574-FGqddMF8t3kC3Lxdv3Bb1cUk"
AI_MEMORY_KEY = "aim" + "_Zk3v9QpX2mL7rT1yB8nC4dF6gH0jK5sW9eR2tY7uI1o"
SLACK_APP = "xapp" + "-1-A02ABCDEF12-3456789012345-0a1b2c3d4e5f"
JWT = (
    "eyJ" + "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    "." + "eyJ" + "zdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    "." + "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
BEARER = "Ab9xY3kLm2Qr7Tz" + "P5vW8nC1sD4fG6hJ"
PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\nVJTUt9Us8cKjMzEfYyjiWA4R4/M2bS1+fWIcPm15A8vuZQ==\n"
PEM = "-----BEGIN " + "RSA PRIVATE KEY-----\n" + PEM_BODY + "-----END RSA PRIVATE KEY-----"
GLPAT = "glpat" + "-" + "Xk3Lm9Qp2Rt7Vw4Yz1Bc"
NPM = "npm" + "_" + "Zx8Kq2Lm4Np6Rs8Tu0Vw2Xy4Za6Bc8De0Fg2"
HF = "hf" + "_" + "QkLmZpXyRtVwNbGhJcDsFaEuIoPqWeRtYu"
SENDGRID = (
    "SG" + "." + "Kq8Lw2Mx4Ny6Pz8Qa0Rb1S" + "." + "Tc3Ud5Ve7Wf9Xg1Yh3Zi5Aj7Bk9Cl1Dm3En5Fo7Gp9H"
)
DOCKER_PAT = "dckr" + "_pat_" + "Xk3Lm9Qp2Rt7Vw4Yz1Bc8Dn6Fh0"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG" + "/bPxRfiCYzq7Lk2Tn9V"
AWS_SESSION = "IQoJb3JpZ2lu" + "X2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQD" * 4
AZURE_KEY = (
    "Eby8vdM02xNOcqF" + "lqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
HEX40 = "3f2a9c8e1b7d4f6a0c5e2b9d8a7f6e5d4c3b2a19"
SHOPIFY = "shpat" + "_" + "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
TWILIO = "SK" + "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
LINEAR = "lin" + "_api_" + "Xk3Lm9Qp2Rt7Vw4Yz1Bc" * 2


def _scrub(text: str) -> str:
    return scrubber_builtin().scrub(text)


# (text, expected) for every built-in family; the id names the secret kind.
REDACTED_CASES = [
    # 1. Bearer tokens: the token goes, the word stays.
    pytest.param(
        f"call with Bearer {BEARER} please", "call with Bearer [REDACTED] please", id="bearer"
    ),
    pytest.param(f"bearer {BEARER}=", "bearer [REDACTED]", id="bearer_lowercase_padded"),
    # 2. OpenAI-style and Stripe keys.
    pytest.param(f"key {OPENAI} here", "key [REDACTED] here", id="openai_project_key"),
    pytest.param(f"use {ANTHROPIC}.", "use [REDACTED].", id="anthropic_key"),
    pytest.param(f"stripe {STRIPE_LIVE} ok", "stripe [REDACTED] ok", id="stripe_live_key"),
    pytest.param(f"rk {STRIPE_RESTRICTED} ok", "rk [REDACTED] ok", id="stripe_restricted_key"),
    pytest.param(f"test {STRIPE_TEST} ok", "test [REDACTED] ok", id="stripe_test_key"),
    # 3. GitHub tokens.
    pytest.param(f"token {GHP} works", "token [REDACTED] works", id="github_classic_token"),
    pytest.param(
        f"app ghs_{ALNUM36} and gho_{ALNUM36}", "app [REDACTED] and [REDACTED]", id="github_app"
    ),
    pytest.param(f"pat {GITHUB_PAT} end", "pat [REDACTED] end", id="github_fine_grained_pat"),
    # 4. AWS access key ids.
    pytest.param(f"id {AWS_KEY} set", "id [REDACTED] set", id="aws_access_key_id"),
    pytest.param(f"sts {AWS_TEMP_KEY}.", "sts [REDACTED].", id="aws_temporary_key_id"),
    # 5. Google.
    pytest.param(f"maps {GOOGLE_API} key", "maps [REDACTED] key", id="google_api_key"),
    pytest.param(f"refresh {GOOGLE_REFRESH} x", "refresh [REDACTED] x", id="google_refresh"),
    # 6. Meta.
    pytest.param(f"fb {META} end", "fb [REDACTED] end", id="meta_token"),
    # 7. Telegram, bare and inside the Bot API URL.
    pytest.param(f"bot {TELEGRAM} up", "bot [REDACTED] up", id="telegram_token"),
    pytest.param(
        f"GET https://api.telegram.org/bot{TELEGRAM}/getMe",
        "GET https://api.telegram.org/bot[REDACTED]/getMe",
        id="telegram_token_in_url",
    ),
    # 8. pit- tokens.
    pytest.param(f"use {PIT} now", "use [REDACTED] now", id="pit_token"),
    # 9. Slack.
    pytest.param(f"slack {SLACK_BOT} ok", "slack [REDACTED] ok", id="slack_bot_token"),
    pytest.param(f"socket {SLACK_APP} ok", "socket [REDACTED] ok", id="slack_app_token"),
    pytest.param(f"my key {AI_MEMORY_KEY}.", "my key [REDACTED].", id="ai_memory_token"),
    # 10. JWTs.
    pytest.param(f"jwt {JWT} end", "jwt [REDACTED] end", id="jwt"),
    # 11. PEM private keys, whole block; JSON-escaped; truncated (no END line).
    pytest.param(f"key:\n{PEM}\nthanks", "key:\n[REDACTED]\nthanks", id="pem_block"),
    pytest.param(
        '{"pem": "' + PEM.replace("\n", "\\n") + '\\n", "id": 1}',
        '{"pem": "[REDACTED]\\n", "id": 1}',
        id="pem_in_json",
    ),
    pytest.param(
        "-----BEGIN " + "OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n",
        "[REDACTED]",
        id="pem_truncated",
    ),
    pytest.param(
        "-----BEGIN " + "RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n"
        "DEK-Info: AES-128-CBC,0123ABCD\n\n" + PEM_BODY + "-----END RSA PRIVATE KEY-----\nok",
        "[REDACTED]\nok",
        id="pem_encrypted",
    ),
    # 12. Credentials inside URLs: scheme and host stay.
    pytest.param(
        "db postgres://app:s3cr3t@db.example.com:5432/app now",
        "db postgres://[REDACTED]@db.example.com:5432/app now",
        id="url_credentials",
    ),
    pytest.param(
        "redis://:p@ss@cache:6379/0", "redis://[REDACTED]@cache:6379/0", id="url_password_with_at"
    ),
    # 13. Auth-bearing headers.
    pytest.param("X-Api-Key: 9f8e7d6c5b4a", "X-Api-Key: [REDACTED]", id="x_api_key_header"),
    pytest.param("x-auth-token: 9f8e7d6c5b4a", "x-auth-token: [REDACTED]", id="x_auth_token"),
    pytest.param("Api-Key: 9f8e7d6c5b4a\nnext", "Api-Key: [REDACTED]\nnext", id="api_key_header"),
    pytest.param(
        "Proxy-Authorization: Basic dXNlcjpwYXNzd29yZA==",
        "Proxy-Authorization: Basic [REDACTED]",
        id="proxy_authorization_basic",
    ),
    pytest.param(
        "Authorization: token 0123456789abcdef",
        "Authorization: token [REDACTED]",
        id="authorization_token_scheme",
    ),
    pytest.param(
        'curl -H "X-Api-Key: 9f8e7d6c5b4a" https://api.example.com/v1?x=1',
        'curl -H "X-Api-Key: [REDACTED]" https://api.example.com/v1?x=1',
        id="header_in_curl",
    ),
    pytest.param(
        '{"X-Api-Key": "9f8e7d6c5b4a", "Accept": "application/json"}',
        '{"X-Api-Key": "[REDACTED]", "Accept": "application/json"}',
        id="header_in_json",
    ),
    pytest.param(
        "Cookie: sessionid=4f9a8b7c6d5e; csrftoken=a1b2c3 was sent",
        "Cookie: [REDACTED] was sent",
        id="cookie_header",
    ),
    pytest.param(
        'Authorization: Digest username="bob", nonce="dcd98b7102dd", response="6629fae49393"',
        "Authorization: Digest [REDACTED]",
        id="authorization_digest",
    ),
    # 14. Provider variables, any case, quoted or not.
    pytest.param(
        "export ANTHROPIC_API_KEY=abc123xyz && run",
        "export ANTHROPIC_API_KEY=[REDACTED] && run",
        id="anthropic_env",
    ),
    pytest.param(
        "OPENAI_API_KEY='two words'", "OPENAI_API_KEY='[REDACTED]'", id="openai_env_quoted"
    ),
    pytest.param(
        'openai_api_key = "abc123"', 'openai_api_key = "[REDACTED]"', id="openai_lowercase_code"
    ),
    pytest.param("PGPASSWORD=hunter2 psql", "PGPASSWORD=[REDACTED] psql", id="pgpassword"),
    # 15. Generic *_KEY / *_TOKEN / ... assignments: the name stays.
    pytest.param("API_KEY=x9f3k2 rest", "API_KEY=[REDACTED] rest", id="generic_api_key"),
    pytest.param("DB_PASSWORD: hunter2", "DB_PASSWORD: [REDACTED]", id="generic_password_yaml"),
    pytest.param('MY_SECRET="a b c"', 'MY_SECRET="[REDACTED]"', id="generic_secret_quoted"),
    pytest.param(
        '{"WEBHOOK_TOKEN": "abc123"}', '{"WEBHOOK_TOKEN": "[REDACTED]"}', id="generic_token_json"
    ),
    pytest.param("GCP_CREDENTIALS=abc", "GCP_CREDENTIALS=[REDACTED]", id="generic_credentials"),
    pytest.param("SVC_CREDENTIAL=abc", "SVC_CREDENTIAL=[REDACTED]", id="generic_credential"),
    pytest.param("SSH_PRIVATE_KEY=abc", "SSH_PRIVATE_KEY=[REDACTED]", id="generic_private_key"),
    # 16. Paths into credential directories.
    pytest.param("cat ~/.ssh/id_ed25519 now", "cat [REDACTED] now", id="ssh_path"),
    pytest.param("see ~/.aws/credentials.", "see [REDACTED].", id="aws_path"),
    pytest.param("use .kube/config here", "use [REDACTED] here", id="kube_relative_path"),
    pytest.param(
        "/home/bob/.config/gcloud/application_default_credentials.json",
        "[REDACTED]",
        id="gcloud_path",
    ),
    pytest.param("(~/.gnupg/pubring.kbx)", "([REDACTED])", id="gnupg_path"),
    pytest.param("scp host:~/.ssh/id_rsa .", "scp host:[REDACTED] .", id="ssh_path_after_host"),
    pytest.param(r"C:\Users\bob\.ssh\id_rsa", "C:[REDACTED]", id="windows_ssh_path"),
    # 18. GitLab tokens; a sentence's final dot stays.
    pytest.param(
        f"glab auth login --token {GLPAT}", "glab auth login --token [REDACTED]", id="glpat"
    ),
    pytest.param(f"use {GLPAT}.01.0r03gxo7a.", "use [REDACTED].", id="glpat_routable"),
    pytest.param("deploy " + "gldt" + "-Ae5Fg8Hj2Kl4Mn6Pq9Rs", "deploy [REDACTED]", id="gldt"),
    # 19. npm tokens.
    pytest.param(f"token {NPM} ok", "token [REDACTED] ok", id="npm_token"),
    # 20. Hugging Face.
    pytest.param(
        f"huggingface-cli login --token {HF}", "huggingface-cli login --token [REDACTED]", id="hf"
    ),
    # 21. SendGrid.
    pytest.param(
        f"SendGridAPIClient('{SENDGRID}')", "SendGridAPIClient('[REDACTED]')", id="sendgrid"
    ),
    # 22. Docker access tokens.
    pytest.param(f"pat {DOCKER_PAT} end", "pat [REDACTED] end", id="docker_pat"),
    # 23. AWS secret keys next to a key id, after it or before it.
    pytest.param(
        f"{AWS_KEY},{AWS_SECRET}\n{HEX40},{AWS_SECRET}",
        f"[REDACTED],[REDACTED]\n{HEX40},{AWS_SECRET}",
        id="aws_secret_after_key_id_on_its_line_only",
    ),
    pytest.param(
        f"secret {AWS_SECRET} for {AWS_TEMP_KEY}",
        "secret [REDACTED] for [REDACTED]",
        id="aws_secret_before_key_id",
    ),
    pytest.param(
        f"{AWS_KEY} rotated in {HEX40}", f"[REDACTED] rotated in {HEX40}", id="aws_sha_stays"
    ),
    # 24. AWS session tokens.
    pytest.param(f"token {AWS_SESSION} end", "token [REDACTED] end", id="aws_session_token"),
    # 25. Slack webhooks: team and bot ids stay.
    pytest.param(
        "https://hooks.slack.com/services/T024BE7LD/B01ABCDE2FG/" + "Xk3Lm9Qp2Rt7Vw4Yz1Bc8Dn6",
        "https://hooks.slack.com/services/T024BE7LD/B01ABCDE2FG/[REDACTED]",
        id="slack_webhook",
    ),
    # 26. Azure connection strings and SAS.
    pytest.param(
        f"AccountName=acme;AccountKey={AZURE_KEY};EndpointSuffix=core.windows.net",
        "AccountName=acme;AccountKey=[REDACTED];EndpointSuffix=core.windows.net",
        id="azure_account_key",
    ),
    pytest.param(
        "SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=q8Lw2Mx4Ny6Pz8Qa0R=",
        "SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=[REDACTED]",
        id="azure_shared_access_key",
    ),
    pytest.param(
        "BlobEndpoint=https://acme.blob.core.windows.net/;"
        "SharedAccessSignature=sv=2022-11-02&ss=b&sig=Xk3Lm9%2BQp2%3D;x=1",
        "BlobEndpoint=https://acme.blob.core.windows.net/;SharedAccessSignature=[REDACTED];x=1",
        id="azure_sas_in_connection_string",
    ),
    pytest.param(
        "https://acme.blob.core.windows.net/c/f?sv=2022-11-02&sp=r&sig=Xk3Lm9%2BQp2%3D&x=1",
        "https://acme.blob.core.windows.net/c/f?sv=2022-11-02&sp=r&sig=[REDACTED]&x=1",
        id="azure_sas_url",
    ),
    # 27. npm and Yarn registry credentials.
    pytest.param(
        "//registry.npmjs.org/:_authToken=6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b",
        "//registry.npmjs.org/:_authToken=[REDACTED]",
        id="npmrc_legacy_token",
    ),
    pytest.param("_auth = Ym9iOnMzY3JldA==", "_auth = [REDACTED]", id="npmrc_auth"),
    pytest.param(
        "//npm.example.com/:_password=czNjcmV0",
        "//npm.example.com/:_password=[REDACTED]",
        id="npmrc_password",
    ),
    pytest.param('npmAuthToken: "abc123def"', 'npmAuthToken: "[REDACTED]"', id="yarnrc"),
    # 28. Credential assignments, any case and syntax.
    pytest.param("password: hunter2", "password: [REDACTED]", id="password_yaml"),
    pytest.param(
        "Password: hunter2 is in the vault", "Password: [REDACTED] is in the vault", id="one_word"
    ),
    pytest.param("password = hunter2", "password = [REDACTED]", id="ini_spaced"),
    pytest.param("user=bob, password=hunter2", "user=bob, password=[REDACTED]", id="listed_prose"),
    pytest.param('"password": "string1"', '"password": "[REDACTED]"', id="near_placeholder"),
    pytest.param('{"password": "a b"}', '{"password": "[REDACTED]"}', id="password_json"),
    pytest.param("'PASSWORD': 'x1',", "'PASSWORD': '[REDACTED]',", id="django_password"),
    pytest.param(
        "host=db user=app password=s3cret dbname=app",
        "host=db user=app password=[REDACTED] dbname=app",
        id="libpq_conninfo",
    ),
    pytest.param("-o user=bob,passwd=x9,uid=1", "-o user=bob,passwd=[REDACTED],uid=1", id="passwd"),
    pytest.param("Uid=sa;Pwd=Sq1!;Encrypt=yes", "Uid=sa;Pwd=[REDACTED];Encrypt=yes", id="odbc_pwd"),
    pytest.param("a=1&client_secret=c5e8&b=2", "a=1&client_secret=[REDACTED]&b=2", id="query"),
    pytest.param("app.secret_key = 'dev-key'", "app.secret_key = '[REDACTED]'", id="secret_key"),
    pytest.param("**Password:** hunter2", "**Password:** [REDACTED]", id="markdown_bold"),
    pytest.param("password: `hunter2`", "password: `[REDACTED]`", id="markdown_code"),
    pytest.param("--db-password=x9 --user=a", "--db-password=[REDACTED] --user=a", id="flag"),
    pytest.param('password := "g0"', 'password := "[REDACTED]"', id="go_short_assignment"),
    pytest.param("'password' => 'x9',", "'password' => '[REDACTED]',", id="php_array"),
    pytest.param("password: a&b (x)", "password: [REDACTED] (x)", id="colon_value_keeps_ampersand"),
    pytest.param(
        f'"SecretAccessKey": "{AWS_SECRET}",', '"SecretAccessKey": "[REDACTED]",', id="sts_json"
    ),
    pytest.param(
        f"AWS Secret Access Key [None]: {AWS_SECRET}",
        "AWS Secret Access Key [None]: [REDACTED]",
        id="aws_configure_prompt",
    ),
    pytest.param(
        f"aws configure set aws_secret_access_key {AWS_SECRET}",
        "aws configure set aws_secret_access_key [REDACTED]",
        id="aws_configure_set",
    ),
    # 29. MySQL and MariaDB passwords on the command line.
    pytest.param(
        "mysql -h db -P 3306 -u root -pS3cret! shop",
        "mysql -h db -P 3306 -u root -p[REDACTED] shop",
        id="mysql_p",
    ),
    pytest.param(
        "mysqldump -uroot -p'a b' db", "mysqldump -uroot -p'[REDACTED]' db", id="mysql_quoted"
    ),
    pytest.param(
        "mariadb --password=M4ria -e x", "mariadb --password=[REDACTED] -e x", id="mariadb"
    ),
    # 30. Registry logins.
    pytest.param(
        "docker login -u bob -p R3g! registry.example.com",
        "docker login -u bob -p [REDACTED] registry.example.com",
        id="docker_login_p",
    ),
    pytest.param(
        "podman login --username ci --password=R3g! quay.io",
        "podman login --username ci --password=[REDACTED] quay.io",
        id="podman_login_password",
    ),
    # Invisible characters inside a token do not split it.
    pytest.param(
        f"push {GHP[:12]}\u200b{GHP[12:]} ok", "push [REDACTED] ok", id="zero_width_space"
    ),
    pytest.param(
        f"t {GHP[:5]}\u00ad{GHP[5:20]}\ufeff{GHP[20:]}", "t [REDACTED]", id="soft_hyphen_bom"
    ),
    pytest.param(
        f"t {GHP[:5]}\u200e{GHP[5:20]}\U000e0041{GHP[20:]}\u2063", "t [REDACTED]", id="lrm_tag"
    ),
    # 27, "passwd:" with a value.
    pytest.param("passwd: x9Yk!q", "passwd: [REDACTED]", id="passwd_colon"),
    # 31-33. Shopify, Twilio and Linear keys.
    pytest.param(f"store {SHOPIFY} ok", "store [REDACTED] ok", id="shopify"),
    pytest.param(f"key {TWILIO} ok", "key [REDACTED] ok", id="twilio_api_key"),
    pytest.param(f"linear {LINEAR}.", "linear [REDACTED].", id="linear"),
    # 34. curl's user option: the user name stays.
    pytest.param(
        "curl -sf -u bob:S3cr3t! https://api.example.com | jq .",
        "curl -sf -u bob:[REDACTED] https://api.example.com | jq .",
        id="curl_user",
    ),
    # 35. Tokens in query parameters: the other parameters stay.
    pytest.param(
        "GET https://graph.example.com/me?access_token=Xk3Lm9Qp2Rt7Vw4Yz1Bc&fields=id",
        "GET https://graph.example.com/me?access_token=[REDACTED]&fields=id",
        id="access_token_parameter",
    ),
    # 36. An AWS secret key beside "aws" or "secret", after it or before it.
    pytest.param(
        f"the aws secret is {AWS_SECRET} (prod)",
        "the aws secret is [REDACTED] (prod)",
        id="aws_word",
    ),
    pytest.param(
        f"{AWS_SECRET} is the secret", "[REDACTED] is the secret", id="aws_key_before_word"
    ),
    # 37. A token broken over two lines.
    pytest.param(f"push {GHP[:20]}\n  {GHP[20:]} ok", "push [REDACTED] ok", id="split_token"),
    # 38. URL escapes and HTML entities in a token.
    pytest.param(f"url /x/ghp%5F{ALNUM36}/y", "url /x/[REDACTED]/y", id="url_encoded_prefix"),
    pytest.param(f"<p>{GHP[:20]}&#8203;{GHP[20:]}</p>", "<p>[REDACTED]</p>", id="html_entity"),
    # 37 again: a break inside the prefix, and a token wrapped over three lines.
    pytest.param(f"push {GHP[:2]}\n{GHP[2:]} ok", "push [REDACTED] ok", id="split_prefix"),
    pytest.param(
        f"push {GHP[:14]}\\\n{GHP[14:28]}\\\n{GHP[28:]}\nok",
        "push [REDACTED]\nok",
        id="wrapped_token",
    ),
    # 39. A credential's value on the line after its name.
    pytest.param(
        "db:\n  password:\n    S3cr3t!x\n  host: db",
        "db:\n  password:\n    [REDACTED]\n  host: db",
        id="password_next_line",
    ),
    pytest.param(
        f"Authorization: Bearer\n  {BEARER}",
        "Authorization: Bearer\n  [REDACTED]",
        id="folded_header",
    ),
    # 40. Credentials in base64: a user and a password, a known token.
    pytest.param("creds dXNlcjpTM2NyM3QheA== ok", "creds [REDACTED] ok", id="base64_user_password"),
    pytest.param(
        f"auth {base64.b64encode(GHP.encode()).decode()} ok",
        "auth [REDACTED] ok",
        id="base64_token",
    ),
]


# Text that resembles a secret but must be left exactly as it is.
KEPT_CASES = [
    pytest.param("the bearer of bad news", id="bearer_in_prose"),
    pytest.param("Bearer abc123def456ghi", id="short_bearer_token"),
    pytest.param("pip install sk-learn", id="short_sk_word"),
    pytest.param("the task-0123456789abcdefghijklmn", id="sk_inside_a_word"),
    pytest.param("sk_live_short and pk_live_0123456789abcdefgh", id="short_or_public_stripe"),
    pytest.param("ghp_short and ghx_" + ALNUM36, id="github_near_miss"),
    pytest.param("AKIA0123456789 and akia" + "iosfodnn7example", id="aws_near_miss"),
    pytest.param("AKIA" + "IOSFODNN7EXAMPLEX", id="aws_too_long"),
    pytest.param("AIza short and x = 1//2 and y = 1//n_items", id="google_near_miss"),
    pytest.param("EAAS in a sentence, EAA0123456789", id="meta_near_miss"),
    pytest.param("12345678:short and at 10:30:45", id="telegram_near_miss"),
    pytest.param("pit-stop and cockpit-6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b", id="pit_near_miss"),
    pytest.param("xoxb-token and xoxo-hugs", id="slack_near_miss"),
    pytest.param("claim_to_fame and aim_high_goals", id="ai_memory_token_near_miss"),
    pytest.param("header eyJhbGciOiJIUzI1NiJ9 only", id="jwt_header_only"),
    pytest.param(
        "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n"
        "-----END PUBLIC KEY-----",
        id="pem_public_key",
    ),
    pytest.param("-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----", id="cert"),
    pytest.param("https://example.com:8443/path?email=a@b.example", id="url_without_userinfo"),
    pytest.param("ssh://git@github.com/org/repo.git", id="url_user_without_password"),
    pytest.param("X-Api-Key: short", id="short_header_value"),
    pytest.param("Authorization: see section 8", id="authorization_in_prose"),
    pytest.param("Content-Type: application/json", id="ordinary_header"),
    pytest.param("OPENAI_API_KEY is not set", id="provider_name_without_value"),
    pytest.param("OPENAI_API_KEY_PATH=/etc/openai", id="provider_name_prefix"),
    pytest.param("MONKEY=banana", id="name_ending_in_key_without_underscore"),
    pytest.param("primary_key=True, sort_key=len", id="lowercase_code_keyword"),
    pytest.param("API_KEY_ID=12345", id="key_is_not_the_last_part"),
    pytest.param("if API_KEY == other:", id="comparison_not_assignment"),
    pytest.param("EMPTY_TOKEN=\nnext line", id="empty_value"),
    pytest.param("the ~/.ssh directory", id="credential_dir_itself"),
    pytest.param("~/.sshrc and foo.aws/bar and ~/.config/nvim/init.lua", id="path_near_miss"),
    pytest.param("Plain text about keys, tokens and passwords.", id="prose"),
    pytest.param("glpat-short and gl-pat-0123456789abcdefghijkl", id="gitlab_near_miss"),
    pytest.param("npm_config_cache=/tmp/npm npm_package_version", id="npm_env_vars"),
    pytest.param("hf_hub_download and hf_" + "a" * 20, id="hf_near_miss"),
    pytest.param("SG.short.key and SG." + "a" * 22 + "." + "b" * 40, id="sendgrid_near_miss"),
    pytest.param("dckr_pat_short", id="docker_pat_near_miss"),
    pytest.param(f"bare {AWS_SECRET} without an id", id="aws_secret_shape_without_context"),
    pytest.param("IQoJb3JpZ2lu is how session tokens start", id="aws_session_prefix_only"),
    pytest.param("post to https://hooks.slack.com/services/ per channel", id="slack_hook_prefix"),
    pytest.param("SharedAccessKeyName=RootManageSharedAccessKey; the sig=abc param", id="azure"),
    pytest.param("//registry.npmjs.org/:_authToken=${NPM_TOKEN}", id="npmrc_reference"),
    pytest.param("the password field is required", id="password_prose"),
    pytest.param("password_reset=True and AUTH_PASSWORD_VALIDATORS = []", id="password_prefix"),
    pytest.param("authenticate(request, username=username, password=password)", id="kwargs"),
    pytest.param("def f(password: str, secret: Optional[str] = None):", id="annotations"),
    pytest.param('password = os.environ["PW"]; pwd = getpass()', id="code_values"),
    pytest.param("password = self.password or settings.DB_PASSWORD", id="attribute_paths"),
    pytest.param("password: ${DB_PASSWORD} and password: '{{ vault_pw }}'", id="placeholders"),
    pytest.param('password: "" and password: ******** and password: null', id="empty_or_masked"),
    pytest.param("WHERE password = %s AND secret = ? AND pwd = :pwd", id="sql_placeholders"),
    pytest.param("Password: !Ref DBPassword", id="cloudformation"),
    pytest.param("Password: see the vault", id="prose_word_after_colon"),
    pytest.param("client_secret: The OAuth client secret.", id="docstring"),
    pytest.param("password: HiddenText | None = None", id="union_annotation"),
    pytest.param("username, password = auth", id="tuple_unpacking"),
    pytest.param("usable_password = value and not value.startswith(x)", id="expression"),
    pytest.param('{ password: void 0 } and {"password": "string?"}', id="schema_placeholders"),
    pytest.param('getpass.getpass("Password: ")', id="unclosed_quote_is_not_a_value"),
    pytest.param("PWD=/home/bob OLDPWD=~/src", id="working_directory"),
    pytest.param("passwd:         files systemd", id="nsswitch"),
    pytest.param("mysql -u root -p shop and mysql -P 3306", id="mysql_prompt_and_port"),
    pytest.param('mysql -uroot -p"$MYSQL_ROOT_PASSWORD"', id="mysql_reference"),
    pytest.param("docker run -p 8080:80 nginx", id="docker_port"),
    pytest.param("docker login -u bob --password-stdin < token.txt", id="password_stdin"),
    pytest.param("Run docker login -p with a token from the vault", id="docker_login_prose"),
    pytest.param("passwd: files systemd and cat: /etc/passwd: No such file", id="passwd_system"),
    pytest.param("shpat_0123 and SKU-0123456789abcdef and lin_api_key", id="token_prefixes"),
    pytest.param("curl -u bob https://x and curl -u : https://y", id="curl_user_only"),
    pytest.param("https://x.example.com/?token=short&api_key={key}", id="query_placeholders"),
    pytest.param(f"the aws fix is {HEX40}; secret {AWS_SECRET}=", id="aws_word_near_misses"),
    pytest.param("sk-learn\nnumpy and ghp_\nnext", id="prefix_at_line_end"),
    pytest.param("file%5Fname and Tom &amp; Jerry&#8203;", id="escapes_in_prose"),
]


def test_marker_is_the_fixed_literal() -> None:
    assert REDACTED == "[REDACTED]"


@pytest.mark.parametrize(("text", "expected"), REDACTED_CASES)
def test_builtin_secret_is_redacted(text: str, expected: str) -> None:
    assert _scrub(text) == expected


@pytest.mark.parametrize("text", KEPT_CASES)
def test_near_miss_is_kept(text: str) -> None:
    assert _scrub(text) == text


@pytest.mark.parametrize(("text", "expected"), REDACTED_CASES)
def test_scrubbing_is_idempotent(text: str, expected: str) -> None:
    once = _scrub(text)
    assert _scrub(once) == once


def test_scrubbing_is_idempotent_on_shuffled_fragments() -> None:
    """Halves of secrets and near misses, glued by separators that move boundaries."""
    texts = [str(p.values[0]) for p in REDACTED_CASES] + [str(p.values[0]) for p in KEPT_CASES]
    pieces = [
        half for text in texts for half in (text, text[: len(text) // 2], text[len(text) // 2 :])
    ]
    glue = ["", " ", "\n", "=", ":", '"', "/", "x", "_", "-", ".", "@", REDACTED]
    rng = random.Random(20240501)
    for _ in range(2000):
        text = "".join(rng.choice(pieces) + rng.choice(glue) for _ in range(rng.randint(1, 5)))
        once = _scrub(text)
        assert _scrub(once) == once, text


def test_every_builtin_family_is_covered_by_a_case() -> None:
    texts = [param.values[0] for param in REDACTED_CASES]
    for pattern in BUILTIN_PATTERNS:
        assert any(pattern.search(str(text)) for text in texts), pattern.pattern


def test_mixed_message_is_scrubbed_once_and_stays_stable() -> None:
    text = (
        f"Deploy notes:\nAuthorization: Bearer {BEARER}\nGITHUB_TOKEN={GHP}\n"
        f"DATABASE_URL=postgres://app:pw@db/app\n{PEM}\nkey at ~/.ssh/id_rsa, done."
    )
    once = _scrub(text)
    assert once == (
        "Deploy notes:\nAuthorization: Bearer [REDACTED]\nGITHUB_TOKEN=[REDACTED]\n"
        "DATABASE_URL=postgres://[REDACTED]@db/app\n[REDACTED]\nkey at [REDACTED], done."
    )
    assert _scrub(once) == once


def test_existing_marker_is_not_mangled_by_a_pattern_matching_inside_it() -> None:
    scrubber = Scrubber((re.compile(r"[A-Z]{4}"),))
    assert scrubber.scrub("ABCD and [REDACTED]") == "[REDACTED] and [REDACTED]"


def test_match_cutting_into_a_marker_is_ignored() -> None:
    scrubber = Scrubber((re.compile(r"ED\]-tail"),))
    assert scrubber.scrub("x [REDACTED]-tail y") == "x [REDACTED]-tail y"


def test_value_holding_an_earlier_redaction_is_redacted_whole() -> None:
    assert _scrub(f"DB_PASSWORD=hunter2@{OPENAI}") == "DB_PASSWORD=[REDACTED]"


def test_operator_pattern_that_reads_marker_letters_stays_idempotent() -> None:
    scrubber = Scrubber((*BUILTIN_PATTERNS, re.compile(r"ACTED\]\s*\w")))
    once = scrubber.scrub(f"token {GHP} and more")
    assert once == "token [REDACTED] and more"
    assert scrubber.scrub(once) == once


def test_prefilter_never_skips_a_pattern_that_would_match() -> None:
    texts = [str(param.values[0]) for param in REDACTED_CASES]
    for pattern, gate in PREFILTERS.items():
        for text in texts:
            if finds_secret(pattern, text):
                assert gate.search(text), (gate.pattern, text)


def test_every_provider_variable_passes_its_prefilter() -> None:
    gate = PREFILTERS[PROVIDER_ENV_ASSIGNMENT]
    names = re.search(r"\(\?:([A-Z_|]+)\)", PROVIDER_ENV_ASSIGNMENT.pattern)
    assert names is not None
    for name in names.group(1).split("|"):
        assert PROVIDER_ENV_ASSIGNMENT.search(f"{name}=value"), name
        assert gate.search(name), name


def _adversarial_inputs(size: int = 100_000) -> list[str]:
    def repeat(unit: str) -> str:
        return (unit * (size // len(unit) + 1))[:size]

    units = [
        "a", "A_", "1", ":", '"', "@", " ", "\\", "-----BEGIN RSA PRIVATE KEY-----",
        "-----BEGIN PRIVATE KEY-----\nMIIE ", "ab+c.", "a://b:", "authorization:",
        "'authorization: '", "cookie: a ", "Bearer ", "eyJ", "eyJaaaaaaaaaa.", "sk-",
        "ghp_", "a/", "x/.ssh/", "./", "A_KEY=", 'A_KEY="', "1//", "12345678:",
        "bot12345678:", "[REDACTED]", "[REDACTED]x", "OPENAI_API_KEY", "x-api-key",
    ]  # fmt: skip
    texts = [repeat(unit) for unit in units]
    texts += ["authorization: x" + " " * size, "bearer" + " " * size, "x://a:" + "@" * size]
    return texts


def test_adversarial_inputs_finish() -> None:
    # No timing assertion: a catastrophic pattern would hang this test instead.
    for text in _adversarial_inputs():
        assert isinstance(_scrub(text), str)


# Near misses for the families added after the security review (18-30): prefixes without
# enough after them, context words without a value, unclosed quotes, long dotted paths
# and flag soup. Each unit is repeated to about 200 KB.
_NEAR_MISS_UNITS = {
    "GITLAB_TOKEN": ["glpat-", "glpat-" + "a" * 19 + " ", "glpat-" + "a" * 20 + ".a." * 3 + "."],
    "NPM_TOKEN": ["npm_", "npm_" + "a" * 35 + " "],
    "HUGGING_FACE_TOKEN": ["hf_", "hf_" + "a" * 33 + " "],
    "SENDGRID_KEY": ["SG.", "SG." + "a" * 22 + "." + "a" * 42 + " ", "SG." + "a" * 22 + "."],
    "DOCKER_TOKEN": ["dckr_pat_", "dckr_pat_" + "a" * 26 + " "],
    "AWS_SECRET_KEY_NEAR_ID": [
        AWS_KEY + " ",
        AWS_KEY + " x",
        "aB3/",
        f"{HEX40} {AWS_KEY} ",
        ALNUM36 + "kL8m ",
    ],
    "AWS_SESSION_TOKEN": ["IQoJb3JpZ2lu ", "FwoGZXIvYXdz" + "a" * 50 + " "],
    "SLACK_WEBHOOK_URL": ["hooks.slack.com/services/", "hooks.slack.com/services/T/B/C/D/"],
    "AZURE_CONNECTION_SECRET": ["AccountKey=;", "&sig=&", "SharedAccessSignature=;"],
    "NPMRC_AUTH": ["_authToken=", "_auth=${", ":_password= "],
    "CREDENTIAL_ASSIGNMENT": [
        "password=",
        "password: ",
        "a.password=",
        "x_x_x_x_password ",
        "password='",
        'password="a ',
        "password=`",
        "password=self.",
        "password: **",
        "secret_access_key ",
        "aws secret access key [",
        "password=a_",
        "pwd=/",
        "password=$password=",
        "--password=",
        "**password**: ",
        "password=" + "a." * 100 + " ",
        "passwd: ",
        "passwd: a ",
        "/passwd: x",
    ],
    "MYSQL_PASSWORD_FLAG": ["mysql ", "mysql -p ", "mysql -p$x ", "mariadb -u"],
    "REGISTRY_LOGIN_PASSWORD": ["docker ", "docker login ", "docker login -p $x ", "docker -"],
    "SHOPIFY_TOKEN": ["shpat_", "shpat_" + "a" * 31 + " "],
    "TWILIO_API_KEY": ["SK", "SK" + "a" * 31 + " "],
    "LINEAR_KEY": ["lin_api_", "lin_api_" + "a" * 31 + " "],
    "CURL_USER_PASSWORD": ["curl ", "curl -u ", "curl -u a", "curl -u a:$x ", "curl --user "],
    "URL_TOKEN_PARAMETER": ["?token=", "&access_token=a", "?token=$", "#api_key=aaaaaaa "],
    "AWS_SECRET_KEY_AFTER_WORD": [
        "aws ",
        "secret ",
        "aws " + "aB3/" * 10 + "/ ",
        "secret" + "a" * 40,
        f"aws {AWS_SECRET} ",
        f"{HEX40} aws ",
    ],
    "AWS_SECRET_KEY_BEFORE_WORD": [
        f"{AWS_SECRET} ",
        f"{AWS_SECRET} " + "x" * 80,
        f"{HEX40} aws ",
        "aB3/" * 10 + " ",
    ],
    "SPLIT_PREFIXED_TOKEN": [
        "ghp_\n",
        "ghp_a\n",
        "github_pat_" + "a" * 40 + "\n",
        "sk-\n\n",
        "ghp_" + "a" * 35 + "\n" + "a" * 2,
        "g\nh\np\n_\n",
        "ghp_a\\\n  ",
        "s\nk-a\n",
        "A\nKIA\n",
    ],
    "CREDENTIAL_ON_NEXT_LINE": [
        "password:\n",
        "password:\n  a",
        "password: |\n  ",
        "API_KEY=\\\n",
        "Authorization: Bearer\n  Basic ",
        "password:\n  'a",
        "password:\n  a:\n",
        "x_token:\n" + "a" * 50 + " ",
    ],
    "BASE64_CREDENTIAL": [
        "aaaa",
        "aaaaaaaaaaaaa ",
        "dXNlcjpwYXNz ",
        "dXNlcjpwYXNz=",
        "a+b-",
        "====",
    ],
    "DISGUISED_PREFIXED_TOKEN": [
        "ghp%5F",
        "ghp_&#8203;",
        "ghp_a&zwnj;",
        "sk-&#1;",
        "%5Fghp%5F",
        "ghp%5F" + "a&#8203;" * 10,
    ],
}


@pytest.mark.parametrize("name", sorted(_NEAR_MISS_UNITS))
def test_new_pattern_is_linear_on_near_misses(name: str) -> None:
    # No timing assertion: a pattern that backtracked catastrophically would hang here.
    # Locally each of these runs in well under 0.1 s.
    pattern = getattr(secret_patterns, name)
    assert pattern in BUILTIN_PATTERNS
    size = 200_000
    for unit in _NEAR_MISS_UNITS[name]:
        repeated = (unit * (size // len(unit) + 1))[:size]
        for text in (repeated, unit + "a" * size, unit + " " * size):
            assert sum(1 for _ in pattern.finditer(text)) >= 0


def test_every_new_family_has_near_misses() -> None:
    # The seventeen original families are exercised by _adversarial_inputs above.
    assert len(BUILTIN_PATTERNS) == 17 + len(_NEAR_MISS_UNITS)


# --- Invisible characters ---------------------------------------------------------------


@pytest.mark.parametrize(
    "character",
    ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u200e", "\U000e0020"],
    ids=["zwsp", "zwnj", "zwj", "word_joiner", "bom", "soft_hyphen", "lrm", "tag_space"],
)
def test_invisible_character_inside_a_token_does_not_hide_it(character: str) -> None:
    for cut in (1, 4, 5, 20, len(GHP) - 1):
        text = f"token {GHP[:cut]}{character}{GHP[cut:]} ok"
        assert _scrub(text) == "token [REDACTED] ok", cut


def test_invisible_characters_are_removed_everywhere() -> None:
    text = "\ufeffplain\u200b text, no\u00ad secret \U0001f468\u200d\U0001f469"
    once = _scrub(text)
    assert once == "plain text, no secret \U0001f468\U0001f469"
    assert _scrub(once) == once


def test_invisible_character_cannot_break_a_context_rule() -> None:
    assert _scrub("password:\u200b hunter2") == "password: [REDACTED]"
    assert _scrub(f"{AWS_KEY}\u2060,{AWS_SECRET[:9]}\u200c{AWS_SECRET[9:]}") == (
        "[REDACTED],[REDACTED]"
    )


# --- Scrub, then cap -------------------------------------------------------------------


def test_secret_straddling_the_cap_leaves_no_fragment() -> None:
    body = "a" * 7990 + " " + GHP
    capped = text_cap(_scrub(body), 8000, "message body")
    assert capped.startswith("a" * 7990 + " [REDACTE")
    assert capped.endswith("\n[message body truncated; 1 chars omitted]")
    for size in range(4, len(GHP) + 1):
        assert GHP[:size] not in capped


def test_cap_before_scrub_would_leak_a_token_prefix() -> None:
    body = "a" * 7990 + " " + GHP
    wrong_order = _scrub(text_cap(body, 8000, "message body"))
    assert GHP[:9] in wrong_order


# --- [sanitize] configuration -----------------------------------------------------------


def _configure(settings: SettingsWrapper, tmp_path: Path, toml: str) -> None:
    path = tmp_path / "ai-memory.toml"
    path.write_text(toml, encoding="utf-8")
    settings.AI_MEMORY_CONFIG = str(path)


def test_no_config_means_builtin_patterns(settings: SettingsWrapper) -> None:
    settings.AI_MEMORY_CONFIG = ""
    assert scrubber_configured() is scrubber_builtin()


def test_extra_pattern_is_redacted(settings: SettingsWrapper, tmp_path: Path) -> None:
    _configure(settings, tmp_path, '[sanitize]\nextra_patterns = ["ACME-[0-9]{6}"]\n')
    scrubber = scrubber_configured()
    assert scrubber.scrub("ticket ACME-123456 and ACME-12") == "ticket [REDACTED] and ACME-12"
    assert scrubber.scrub(f"id {AWS_KEY}") == "id [REDACTED]"


def test_extra_pattern_secret_group_redacts_only_that_group(
    settings: SettingsWrapper, tmp_path: Path
) -> None:
    _configure(settings, tmp_path, "[sanitize]\nextra_patterns = ['pin=(?P<secret>\\d{4})']\n")
    assert scrubber_configured().scrub("pin=1234") == "pin=[REDACTED]"


def test_allowlisted_match_is_kept(settings: SettingsWrapper, tmp_path: Path) -> None:
    demo = "sk" + "-test-public-demo-key-000000"
    _configure(settings, tmp_path, f'[sanitize]\nallowlist = ["{demo}"]\n')
    scrubber = scrubber_configured()
    assert scrubber.scrub(f"demo {demo}, real {OPENAI}") == f"demo {demo}, real [REDACTED]"
    assert scrubber.scrub(f"OPENAI_API_KEY={demo}") == f"OPENAI_API_KEY={demo}"
    assert scrubber_builtin().scrub(f"demo {demo}") == "demo [REDACTED]"


def test_allowlist_compares_exact_strings_not_regexes(
    settings: SettingsWrapper, tmp_path: Path
) -> None:
    _configure(settings, tmp_path, '[sanitize]\nallowlist = [".*", "ghp_"]\n')
    assert scrubber_configured().scrub(f"t {GHP}") == "t [REDACTED]"


def test_configured_scrubber_is_built_once(settings: SettingsWrapper, tmp_path: Path) -> None:
    _configure(settings, tmp_path, '[sanitize]\nextra_patterns = ["ACME-[0-9]{6}"]\n')
    assert scrubber_configured() is scrubber_configured()


def test_other_tables_in_the_config_are_ignored(settings: SettingsWrapper, tmp_path: Path) -> None:
    _configure(settings, tmp_path, '[[admission_webhooks]]\nurl = "http://x"\n')
    assert scrubber_configured().scrub(f"t {GHP}") == "t [REDACTED]"


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        pytest.param(
            '[sanitize]\nextra_patterns = ["ACME-[0-9"]\n',
            r"extra_patterns\[0\] 'ACME-\[0-9' is not a valid regular expression",
            id="bad_regex",
        ),
        pytest.param("[sanitize\nextra_patterns = 1\n", "not valid TOML", id="bad_toml"),
        pytest.param(
            '[sanitize]\nallow_list = ["x"]\n', "unknown key.*allow_list", id="misspelt_key"
        ),
        pytest.param(
            '[sanitize]\nextra_patterns = "ACME"\n',
            "extra_patterns must be a list of strings",
            id="pattern_not_a_list",
        ),
        pytest.param(
            "[sanitize]\nallowlist = [1]\n", "allowlist must be a list of strings", id="bad_entry"
        ),
        pytest.param('[sanitize]\nextra_patterns = [""]\n', "is empty", id="empty_pattern"),
        pytest.param('sanitize = "on"\n', r"\[sanitize\] must be a table", id="not_a_table"),
    ],
)
def test_bad_config_fails_loudly(
    settings: SettingsWrapper, tmp_path: Path, toml: str, message: str
) -> None:
    _configure(settings, tmp_path, toml)
    with pytest.raises(ImproperlyConfigured, match=message):
        scrubber_configured()


def test_missing_config_file_fails_loudly(settings: SettingsWrapper, tmp_path: Path) -> None:
    settings.AI_MEMORY_CONFIG = str(tmp_path / "absent.toml")
    with pytest.raises(ImproperlyConfigured, match="cannot read the file"):
        scrubber_configured()
