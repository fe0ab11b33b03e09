"""Secret scrubbing against a corpus: planted secrets as tools print them, and prose.

The planted lines are the formats a security review used (36 planted secrets, 12 of
which once survived) plus the ones the built-in patterns always handled; the kinds a
second review found surviving are planted with generated values in
test_scrubbing_survivors.py, and their look-alikes are prose here. Each must lose
its secret and show the marker. The prose lines are ordinary engineering text that
looks a little like a secret (password talk, SHAs, UUIDs, flags, placeholders); they
must come through byte for byte, because a pattern that redacts ordinary prose is worse
than none.

Fake secrets are assembled from pieces at run time so that secret scanners reading the
repository do not mistake the fixtures for leaked credentials.
"""

from __future__ import annotations

import pytest

from aimemory_site.lib.scrubbing import BUILTIN_PATTERNS, PREFILTERS, REDACTED, scrubber_builtin
from aimemory_site.lib.secret_patterns import finds_secret

# --- Fake secrets ----------------------------------------------------------------------

AWS_KEY_ID = "AKIA" + "Z7Q2M4X9K3B8N6C1"
AWS_TEMP_KEY_ID = "ASIA" + "Q3EGRJ7XKZ4WNTPL"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG" + "/bPxRfiCYzq7Lk2Tn9V"
AWS_SECRET_2 = "Hq9+Lm3Vx7Rt2Pz8" + "Kc4Wn6Bf1Yd5Gs0Ja/Ue3Io8"
AWS_SESSION = "IQoJb3JpZ2lu" + "X2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQD" * 4 + "Zm9v"
NPM = "npm" + "_" + "Zx8Kq2Lm4Np6Rs8Tu0Vw2Xy4Za6Bc8De0Fg2"
NPM_AUTH_BASIC = "Ym9iOnMzY3Jl" + "dC1ucG0tcGFzcw=="
GLPAT = "glpat" + "-" + "Xk3Lm9Qp2Rt7Vw4Yz1Bc"
GLDT = "gldt" + "-" + "Ae5Fg8Hj2Kl4Mn6Pq9Rs"
GLRT = "glrt" + "-" + "t1_Kq8Lw2Mx4Ny6Pz8Qa0Rb"
HF = "hf" + "_" + "QkLmZpXyRtVwNbGhJcDsFaEuIoPqWeRtYu"
SENDGRID = (
    "SG" + "." + "Kq8Lw2Mx4Ny6Pz8Qa0Rb1S" + "." + "Tc3Ud5Ve7Wf9Xg1Yh3Zi5Aj7Bk9Cl1Dm3En5Fo7Gp9H"
)
AZURE_KEY = (
    "Eby8vdM02xNOcqF" + "lqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
AZURE_SB_KEY = "q8Lw2Mx4Ny6Pz8Qa0" + "Rb1STc3Ud5Ve7Wf9Xg1Yh3Z="
AZURE_SIG = "Xk3Lm9Qp2Rt7Vw4Yz1Bc" + "%2BEby8vdM02xNOcqF%3D"
SLACK_HOOK_SECRET = "Xk3Lm9Qp2Rt7" + "Vw4Yz1Bc8Dn6"
DOCKER_PAT = "dckr" + "_pat_" + "Xk3Lm9Qp2Rt7Vw4Yz1Bc8Dn6Fh0"
GHP = "ghp" + "_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC2eF4hJ6"
GITHUB_PAT = "github" + "_pat_" + "11ABCDEFG0123456789abc" + "_" + "x7" * 29 + "q"
SLACK_BOT = "xoxb" + "-263594206564-2343594206574-FGqddMF8t3kC3Lxdv3Bb1cUk"
STRIPE_LIVE = "sk" + "_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
GOOGLE_API = "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"
OPENAI = "sk" + "-proj-" + "Xy12" * 12
ANTHROPIC = "sk" + "-ant-api03-" + "Ab9_" * 10
JWT = (
    "eyJ" + "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    "." + "eyJ" + "zdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    "." + "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKjMzEfYyjiWA4R4"
BEARER = "Ab9xY3kLm2Qr7Tz" + "P5vW8nC1sD4fG6hJ"


ZWSP = "\u200b"
ZWJ = "\u200d"
WORD_JOINER = "\u2060"
BOM = "\ufeff"
SOFT_HYPHEN = "\u00ad"


def _zero_width(token: str, character: str) -> str:
    """The token with an invisible character planted in its middle."""
    middle = len(token) // 2
    return token[:middle] + character + token[middle:]


# (line, secrets): every secret string must be gone from the scrubbed line.
PLANTED = [
    # AWS secret access keys without an environment-variable name.
    pytest.param(
        f"bob,,{AWS_KEY_ID},{AWS_SECRET},https://123456789012.signin.aws.amazon.com/console",
        [AWS_KEY_ID, AWS_SECRET],
        id="aws_iam_credentials_csv",
    ),
    pytest.param(
        f"ACCESSKEY\t{AWS_KEY_ID}\t2024-05-01T12:00:00+00:00\t{AWS_SECRET}\tActive\tbob",
        [AWS_KEY_ID, AWS_SECRET],
        id="aws_iam_create_access_key_text",
    ),
    pytest.param(
        f'        "SecretAccessKey": "{AWS_SECRET_2}",',
        [AWS_SECRET_2],
        id="aws_sts_assume_role_json_secret",
    ),
    pytest.param(
        f'        "SessionToken": "{AWS_SESSION}",',
        [AWS_SESSION],
        id="aws_sts_assume_role_json_session_token",
    ),
    pytest.param(
        f"CREDENTIALS\t{AWS_TEMP_KEY_ID}\t2024-05-01T13:00:00+00:00\t{AWS_SECRET_2}\t{AWS_SESSION}",
        [AWS_TEMP_KEY_ID, AWS_SECRET_2, AWS_SESSION],
        id="aws_sts_get_session_token_text",
    ),
    pytest.param(f"aws_secret_access_key = {AWS_SECRET}", [AWS_SECRET], id="aws_credentials_file"),
    pytest.param(
        f"AWS Secret Access Key [None]: {AWS_SECRET}", [AWS_SECRET], id="aws_configure_prompt"
    ),
    pytest.param(
        f"aws configure set aws_secret_access_key {AWS_SECRET_2}",
        [AWS_SECRET_2],
        id="aws_configure_set",
    ),
    pytest.param(
        f"  credentials: {{ accessKeyId: '{AWS_KEY_ID}', secretAccessKey: '{AWS_SECRET}' }},",
        [AWS_KEY_ID, AWS_SECRET],
        id="aws_js_sdk_client_config",
    ),
    # Passwords in config, code and command lines.
    pytest.param("password: hunter2", ["hunter2"], id="password_yaml"),
    pytest.param(
        "Staging login: **Username:** admin **Password:** St4g1ng-Adm1n",
        ["St4g1ng-Adm1n"],
        id="password_markdown",
    ),
    pytest.param("[client]\nuser = root\npassword = MyCnf-S3cret\n", ["MyCnf-S3cret"], id="my_cnf"),
    pytest.param("  password: Tr0ub4dor&3", ["Tr0ub4dor&3"], id="password_yaml_with_ampersand"),
    pytest.param(
        '{"username": "admin", "password": "correct-horse-battery-staple"}',
        ["correct-horse-battery-staple"],
        id="password_json",
    ),
    pytest.param("        'PASSWORD': 'dj4ng0-s3cret!',", ["dj4ng0-s3cret!"], id="django_settings"),
    pytest.param(
        "sudo mount -t cifs //nas/share /mnt -o username=bob,passwd=Sh4reP4ss,uid=1000",
        ["Sh4reP4ss"],
        id="cifs_mount_passwd",
    ),
    pytest.param(
        "Driver={ODBC Driver 18 for SQL Server};Server=tcp:db.example.com,1433;Uid=sa;"
        "Pwd=Sq1Server!Pass;Encrypt=yes;",
        ["Sq1Server!Pass"],
        id="odbc_pwd",
    ),
    pytest.param(
        'curl -d "grant_type=client_credentials&client_id=app&client_secret=c5e8f1a9b2d4" '
        "https://login.example.com/oauth2/token",
        ["c5e8f1a9b2d4"],
        id="oauth_client_secret_form",
    ),
    pytest.param("spring.datasource.password=Spr1ngS3cret", ["Spr1ngS3cret"], id="java_properties"),
    pytest.param(
        'psql "host=db.internal port=5432 user=app password=pg-s3cret dbname=app sslmode=require"',
        ["pg-s3cret"],
        id="libpq_conninfo",
    ),
    pytest.param(
        "mysql -h db.internal -P 3306 -u root -pMy5qlRoot! shop",
        ["My5qlRoot!"],
        id="mysql_glued_p",
    ),
    pytest.param(
        "mysqldump -uroot -p'dump s3cret' --all-databases > all.sql",
        ["dump s3cret"],
        id="mysqldump_quoted_p",
    ),
    pytest.param(
        'mariadb --user=app --password=M4riaPass -e "SHOW DATABASES"',
        ["M4riaPass"],
        id="mariadb_password_option",
    ),
    # Registry and package-manager tokens.
    pytest.param(f"//registry.npmjs.org/:_authToken={NPM}", [NPM], id="npmrc_auth_token"),
    pytest.param(
        f"//npm.internal.example.com/:_auth={NPM_AUTH_BASIC}", [NPM_AUTH_BASIC], id="npmrc_auth"
    ),
    pytest.param(f"│ token │ {NPM} │ read-only │", [NPM], id="npm_token_create_table"),
    pytest.param(f"glab auth login --hostname gitlab.com --token {GLPAT}", [GLPAT], id="glpat"),
    pytest.param(
        f"docker login registry.gitlab.com -u gitlab+deploy-token-7 -p {GLDT}",
        [GLDT],
        id="gitlab_deploy_token",
    ),
    pytest.param(
        f"gitlab-runner register --url https://gitlab.com --token {GLRT}",
        [GLRT],
        id="gitlab_runner_token",
    ),
    pytest.param(f"huggingface-cli login --token {HF}", [HF], id="hugging_face"),
    pytest.param(f"sg = SendGridAPIClient('{SENDGRID}')", [SENDGRID], id="sendgrid"),
    pytest.param(f"docker login -u bob -p {DOCKER_PAT}", [DOCKER_PAT], id="docker_pat"),
    pytest.param(
        "docker login registry.example.com --username ci --password 'R3gistry!Pass'",
        ["R3gistry!Pass"],
        id="docker_login_password",
    ),
    # Cloud connection strings and webhooks.
    pytest.param(
        "DefaultEndpointsProtocol=https;AccountName=acmeprod;"
        f"AccountKey={AZURE_KEY};EndpointSuffix=core.windows.net",
        [AZURE_KEY],
        id="azure_storage_connection_string",
    ),
    pytest.param(
        "Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;"
        f"SharedAccessKey={AZURE_SB_KEY}",
        [AZURE_SB_KEY],
        id="azure_service_bus",
    ),
    pytest.param(
        "https://acme.blob.core.windows.net/exports/q3.csv?sv=2022-11-02&ss=b&srt=o&sp=r"
        f"&se=2024-06-01T00:00:00Z&spr=https&sig={AZURE_SIG}",
        [AZURE_SIG],
        id="azure_sas_url",
    ),
    pytest.param(
        "curl -X POST -H 'Content-type: application/json' --data '{\"text\":\"deployed\"}' "
        f"https://hooks.slack.com/services/T024BE7LD/B01ABCDE2FG/{SLACK_HOOK_SECRET}",
        [SLACK_HOOK_SECRET],
        id="slack_webhook",
    ),
    # Zero-width characters inside a token.
    pytest.param(f"push with {_zero_width(GHP, ZWSP)}", [GHP[:20], GHP[20:]], id="zwsp"),
    pytest.param(f"use {_zero_width(GHP, BOM)} now", [GHP[:20], GHP[20:]], id="bom"),
    pytest.param(f"t={_zero_width(GHP, SOFT_HYPHEN)}", [GHP[:20], GHP[20:]], id="soft_hyphen"),
    pytest.param(
        f"token {_zero_width(_zero_width(GHP, WORD_JOINER), ZWJ)}",
        [GHP[:20], GHP[20:]],
        id="word_joiner_and_zwj",
    ),
    # Formats the original built-ins already handled.
    pytest.param(f"aws id {AWS_KEY_ID} in prod", [AWS_KEY_ID], id="aws_key_id"),
    pytest.param(f"git push https://{GHP}@github.com/o/r.git", [GHP], id="github_classic"),
    pytest.param(f"GH_TOKEN={GITHUB_PAT}", [GITHUB_PAT], id="github_fine_grained"),
    pytest.param(f"SLACK_BOT_TOKEN={SLACK_BOT}", [SLACK_BOT], id="slack_bot"),
    pytest.param(f"stripe.api_key = '{STRIPE_LIVE}'", [STRIPE_LIVE], id="stripe_live"),
    pytest.param(f"maps?key={GOOGLE_API}&q=x", [GOOGLE_API], id="google_api_key"),
    pytest.param(
        f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----",
        [PEM_BODY],
        id="pem",
    ),
    pytest.param(f"Cookie: session={JWT}", [JWT], id="jwt_cookie"),
    pytest.param(f"client = OpenAI(api_key='{OPENAI}')", [OPENAI], id="openai"),
    pytest.param(f"x-api-key: {ANTHROPIC}", [ANTHROPIC], id="anthropic"),
    pytest.param(
        "DATABASE_URL=postgres://app:Pg5ecret@db:5432/app", ["Pg5ecret"], id="url_password"
    ),
    pytest.param(
        f'curl -H "Authorization: Bearer {BEARER}" https://api.example.com',
        [BEARER],
        id="bearer_header",
    ),
]

# Ordinary engineering text: every line must come through unchanged.
PROSE = [
    pytest.param("fix(auth): reset the password when the link expires (#412)", id="commit"),
    pytest.param("The password field is required; show the error under it.", id="field"),
    pytest.param("Send a password reset link to the user's email address.", id="reset_link"),
    pytest.param("Forgot your password? Click Reset password on the sign-in page.", id="ui"),
    pytest.param("AUTH_PASSWORD_VALIDATORS = [", id="django_validators"),
    pytest.param(
        '    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},',
        id="django_validator_entry",
    ),
    pytest.param("    id = models.BigAutoField(primary_key=True)", id="primary_key"),
    pytest.param("items.sort(key=len, reverse=True); sort_key=len", id="sort_key"),
    pytest.param(
        "    user = authenticate(request, username=username, password=password)", id="kwargs"
    ),
    pytest.param("def login(username: str, password: str) -> User:", id="annotations"),
    pytest.param("    password: Optional[str] = None", id="optional_annotation"),
    pytest.param("  password: string;", id="typescript_field"),
    pytest.param('    password = form.cleaned_data["password"]', id="cleaned_data"),
    pytest.param('    password = getpass.getpass("Password: ")', id="getpass"),
    pytest.param("    password = os.environ['DB_PASSWORD']", id="environ"),
    pytest.param("    self.password = make_password(raw_password)", id="make_password"),
    pytest.param("    if not user.check_password(password):", id="check_password"),
    pytest.param("const { username, password } = req.body;", id="destructuring"),
    pytest.param('{"password": {"type": "string", "minLength": 12}}', id="json_schema"),
    pytest.param("SELECT id, email, password_hash FROM users WHERE email = %s;", id="sql"),
    pytest.param("UPDATE users SET password = %s, updated_at = now() WHERE id = %s", id="sql_set"),
    pytest.param("ALTER TABLE accounts_user ADD COLUMN password_changed_at timestamptz;", id="ddl"),
    pytest.param("Traceback (most recent call last):", id="traceback_head"),
    pytest.param('  File "/app/accounts/views.py", line 42, in login', id="traceback_frame"),
    pytest.param(
        "django.db.utils.IntegrityError: UNIQUE constraint failed: accounts_user.email",
        id="exception",
    ),
    pytest.param("commit 3f2a9c8e1b7d4f6a0c5e2b9d8a7f6e5d4c3b2a19", id="git_sha"),
    pytest.param(
        "3f2a9c8e1b7d4f6a0c5e2b9d8a7f6e5d4c3b2a19 refs/heads/main AKIA-style ids rotate",
        id="git_sha_in_ls_remote",
    ),
    pytest.param("request 9b2f4c1e-7a3d-4e5f-8a6b-1c2d3e4f5a6b failed after 3 retries", id="uuid"),
    pytest.param(
        '<img src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAAD'
        'UlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==">',
        id="base64_image",
    ),
    pytest.param(
        "digest sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        id="sha256_digest",
    ),
    pytest.param("See https://docs.djangoproject.com/en/5.0/topics/auth/passwords/", id="url"),
    pytest.param("https://github.com/org/repo/pull/412#issuecomment-1234567", id="github_url"),
    pytest.param("docker run -d -p 8080:80 -p 8443:443 --name web nginx:1.25", id="docker_ports"),
    pytest.param("mysql -h db.internal -P 3306 -u app -p shop", id="mysql_prompt"),
    pytest.param(
        "docker exec db sh -c 'exec mysqldump --all-databases -uroot -p\"$MYSQL_ROOT_PASSWORD\"'",
        id="mysql_password_reference",
    ),
    pytest.param("pip install -e . && pytest -q -p no:cacheprovider", id="pip_install"),
    pytest.param("npm run build && npm test -- --watch=false", id="npm_scripts"),
    pytest.param('"scripts": {"build": "vite build", "lint": "eslint ."}', id="package_json"),
    pytest.param("npm_config_registry=https://registry.npmjs.org/ npm ci", id="npm_config_env"),
    pytest.param("//registry.npmjs.org/:_authToken=${NPM_TOKEN}", id="npmrc_reference"),
    pytest.param(
        'echo "$CI_REGISTRY_PASSWORD" | docker login -u "$CI_REGISTRY_USER" --password-stdin',
        id="docker_login_stdin",
    ),
    pytest.param('docker login -u "$DOCKER_USER" -p "$DOCKER_PASSWORD"', id="docker_login_refs"),
    pytest.param("PWD=/home/bob/src/app", id="env_pwd"),
    pytest.param("      password: ${DB_PASSWORD}", id="compose_reference"),
    pytest.param("      Password: !Ref DBPassword", id="cloudformation_ref"),
    pytest.param("    secrets: inherit", id="actions_secrets"),
    pytest.param("kind: Secret", id="k8s_kind"),
    pytest.param("The secret is caching: we memoise the tree walk.", id="secret_in_prose"),
    pytest.param(
        'hf_hub_download(repo_id="bert-base-uncased", filename="config.json")', id="hf_hub"
    ),
    pytest.param("Use AccountName=devstoreaccount1 with the Azurite emulator.", id="azurite"),
    pytest.param(
        "Incoming webhooks live under https://hooks.slack.com/services/ per channel.",
        id="slack_webhook_prefix",
    ),
    pytest.param("The AKIA prefix marks long-term keys, ASIA temporary ones.", id="aws_prose"),
    pytest.param("assert resp.status_code == 200, resp.content", id="assert"),
    pytest.param("passwd:         files systemd", id="nsswitch"),
    pytest.param("cd $(git rev-parse --show-toplevel) && pwd", id="pwd_command"),
    pytest.param("kubectl get secret db-credentials -o yaml", id="kubectl_secret"),
    pytest.param('ssh-keygen -t ed25519 -C "bob@example.com"', id="ssh_keygen"),
    pytest.param("psql -h localhost -U app -d app -c 'SELECT 1'", id="psql_flags"),
    pytest.param("for i in range(0, len(items) // 2):", id="floor_division"),
    # Look-alikes of the kinds a second review planted.
    pytest.param(
        "the aws fix landed in 3f2a9c8e1b7d4f6a0c5e2b9d8a7f6e5d4c3b2a19, secret rotation next",
        id="git_sha_beside_aws_and_secret",
    ),
    pytest.param(
        "The AWS secret access key is shown only once, when the key is created.",
        id="aws_secret_prose",
    ),
    pytest.param(
        "aws s3 sync /srv/Assets/Build2024/Release/Web/Images s3://acme/assets", id="aws_s3_path"
    ),
    pytest.param("secret 9b2f4c1e-7a3d-4e5f-8a6b-1c2d3e4f5a6b was rotated", id="uuid_secret"),
    pytest.param(
        '<img alt="aws secret flow" src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAA'
        'BCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==">',
        id="base64_image_beside_aws",
    ),
    pytest.param("passwd: password updated successfully", id="passwd_command"),
    pytest.param("cat: /etc/passwd: Permission denied", id="etc_passwd_error"),
    pytest.param(
        "curl -u bob https://api.example.com/v1/me (curl asks for the password)", id="curl_user"
    ),
    pytest.param("curl --negotiate -u : https://intranet.example.com/", id="curl_negotiate"),
    pytest.param(
        'curl -u "$API_USER:$API_PASSWORD" https://api.example.com', id="curl_user_reference"
    ),
    pytest.param("https://example.com/oauth/callback?token=<token>&state=xyz", id="query_token"),
    pytest.param("See SKU-12345 and the SK01 sensor; shpat_ and lin_api_ prefix keys.", id="sku"),
    pytest.param("GitHub classic tokens start with ghp_", id="prefix_at_line_end"),
    pytest.param("and are 40 characters long, the prefix included in the count", id="next_line"),
    pytest.param("pip install sk-learn", id="sk_learn_at_line_end"),
    pytest.param("numpy scipy", id="sk_learn_next_line"),
    pytest.param("Tom &amp; Jerry, 50% off, file%5Fname.txt and &#8203; in HTML", id="escapes"),
    pytest.param("I \u2764\ufe0f this; press 1\ufe0f\u20e3 then \u0600\u0661\u0662", id="emoji"),
]


def _scrub(text: str) -> str:
    return scrubber_builtin().scrub(text)


def test_corpus_sizes() -> None:
    assert len(PLANTED) >= 36
    assert len(PROSE) >= 50


@pytest.mark.parametrize(("line", "secrets"), PLANTED)
def test_planted_secret_is_redacted(line: str, secrets: list[str]) -> None:
    scrubbed = _scrub(line)
    assert REDACTED in scrubbed
    for secret in secrets:
        assert secret not in scrubbed


@pytest.mark.parametrize(("line", "secrets"), PLANTED)
def test_planted_line_scrubs_idempotently(line: str, secrets: list[str]) -> None:
    once = _scrub(line)
    assert _scrub(once) == once


@pytest.mark.parametrize("line", PROSE)
def test_prose_is_unchanged(line: str) -> None:
    assert _scrub(line) == line


def test_prose_as_one_message_is_unchanged() -> None:
    text = "\n".join(str(param.values[0]) for param in PROSE)
    assert _scrub(text) == text


def test_prefilters_pass_every_planted_line() -> None:
    lines = [str(param.values[0]) for param in PLANTED]
    for pattern in BUILTIN_PATTERNS:
        gate = PREFILTERS.get(pattern)
        if gate is None:
            continue
        for line in lines:
            if finds_secret(pattern, line):
                assert gate.search(line), (gate.pattern, line)
