"""Schemathesis against the JSON API's own OpenAPI document, served by a real HTTP server.

Every operation of ``/api/v1/openapi.json`` gets schema-valid and schema-invalid requests
over HTTP (pytest-django's ``live_server``), once with alice's bearer on a server with
authentication on and once on an anonymous server. Every answer must be documented: no
5xx, a status the operation declares, a JSON body matching the declared schema, a valid
request accepted and an invalid one refused. The names of existing projects are offered
to the generator often, so success answers are checked against their schemas too, not
only the errors.

Each generated request runs schemathesis's full set of checks, except where a check's
premise does not hold for this API; each such exception is named with its reason below.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest
import requests
import schemathesis
import schemathesis.checks
from hypothesis import HealthCheck, settings
from pytest_django.fixtures import Settings as SettingsWrapper
from pytest_django.live_server_helper import LiveServer
from schemathesis import Case

from aimemory_site.api import api
from tests.conftest import ROOT_TOKEN, Persona, make_project

# The generator's bounds: examples per operation and phase, and a fixed seed with
# derandomised generation, so every run sends the same requests and the whole file stays
# well under a minute and a half on two cores.
MAX_EXAMPLES = 15
SEED = 20260728

WORKSPACE = "default"
PROJECTS = ("project-a", "project-b")
NAME_FIELDS: tuple[str, ...] = ("workspace", "project", "to_workspace", "to_project")
NAME_FIELDS += ("from_workspace", "from_project")


def _fuzz_config(*, auth_on: bool) -> schemathesis.Config:
    """Bounded, derandomised generation that often uses the real names.

    ``auth_on=False``: the anonymous server's case. The document declares the bearer,
    which such a server does not require (docs/operating.md#authentication), so no bearer is generated
    and the checks that expect one to be required are off. Its run skips the coverage
    phase (boundary values of every field, the same for any caller), which alice's run
    already sends, to keep the file within its time budget.
    """
    parameters: dict[str, Any] = {}
    for field in NAME_FIELDS:
        dictionary = "workspaces" if field.endswith("workspace") else "projects"
        binding = {"dictionary": dictionary, "probability": 0.8}
        parameters[f"body.{field}"] = binding
        if field in ("workspace", "project"):
            parameters[f"query.{field}"] = binding
    # A waiting pop or status on an empty inbox would hold its request for up to 60 s,
    # past the client's timeout: waiting has its own tests (tests/messaging/test_message_wait.py).
    parameters["body.wait_seconds"] = parameters["query.wait_seconds"] = 0
    config: dict[str, Any] = {
        "seed": SEED,
        "dictionaries": {
            "workspaces": {"values": [WORKSPACE]},
            "projects": {"values": list(PROJECTS)},
        },
        "parameters": parameters,
        "generation": {
            "max-examples": MAX_EXAMPLES,
            "deterministic": True,
            "database": "none",
            # A failure is reported as found: shrinking against a live server costs
            # minutes, and the fixed seed reproduces the case anyway.
            "no-shrink": True,
            # NUL in any string is 400 invalid_text on every surface (docs/reference.md#json-api), a
            # rule the document cannot state; tests/test_request_guard.py owns it.
            "allow-x00": False,
            "with-security-parameters": auth_on,
        },
        # The method check is pinned on its own: test_an_undeclared_method_gets_405.
        "checks": {"unsupported_method": {"enabled": False}},
        # No links are declared, so the stateful phase would have nothing to walk.
        "phases": {"stateful": {"enabled": False}, "coverage": {"enabled": auth_on}},
    }
    if not auth_on:
        config["checks"] |= {
            "ignored_auth": {"enabled": False},
            "missing_required_header": {"enabled": False},
        }
    return schemathesis.Config.from_dict(config)


# The document the server serves at /api/v1/openapi.json, built in process so pytest can
# make one test per operation at collection time, before any server runs;
# test_the_fuzzed_document_is_the_one_served ties it to the HTTP answer. (The JSON round
# trip turns ninja's integer status keys into the strings it serves.)
DOCUMENT = json.loads(json.dumps(api.get_openapi_schema()))
schema_auth_on = schemathesis.openapi.from_dict(DOCUMENT, config=_fuzz_config(auth_on=True))
schema_anonymous = schemathesis.openapi.from_dict(DOCUMENT, config=_fuzz_config(auth_on=False))


@pytest.fixture
def alice_bearer(alice: Persona, settings: SettingsWrapper, transactional_db: None) -> str:
    """Authentication on, alice owning the projects the generator names; her header."""
    settings.AI_MEMORY_ROOT_TOKEN = ROOT_TOKEN
    for name in PROJECTS:
        make_project(alice, WORKSPACE, name)
    return f"Bearer {alice.token}"


@pytest.fixture
def anonymous_server(transactional_db: None) -> None:
    """No token anywhere, and the projects the generator names."""
    for name in PROJECTS:
        make_project(None, WORKSPACE, name)


def _checks_not_applying(case: Case[Any]) -> list[Any]:
    """The checks whose premise this request does not meet, each for a contract reason."""
    operation = (case.method.upper(), case.operation.path)
    body = case.body if isinstance(case.body, dict) else {}
    if operation == ("POST", "/api/v1/messages") and body.get("in_reply_to") is not None:
        # A well-formed in_reply_to that names no message of the pair is 400
        # invalid_in_reply_to by contract (docs/reference.md#status-replies-and-retries), and a generated UUID
        # names none.
        return [schemathesis.checks.positive_data_acceptance]
    return []


def test_the_fuzzed_document_is_the_one_served(live_server: LiveServer) -> None:
    with urllib.request.urlopen(f"{live_server.url}/api/v1/openapi.json", timeout=10) as answer:
        served = json.load(answer)
    assert served == DOCUMENT
    operations = [op for path in served["paths"].values() for op in path.values()]
    assert len(operations) >= 12


# The server and its data stay the same for every generated request on purpose: state
# (messages sent, pages written) builds up as a client's would.
FIXTURES_SHARED = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])


@schema_auth_on.parametrize()
@FIXTURES_SHARED
def test_every_answer_to_alice_is_documented(
    case: Case[Any], live_server: LiveServer, alice_bearer: str
) -> None:
    case.call_and_validate(
        base_url=live_server.url,
        headers={"Authorization": alice_bearer},
        excluded_checks=_checks_not_applying(case),
    )


@schema_anonymous.parametrize()
@FIXTURES_SHARED
def test_every_answer_of_an_anonymous_server_is_documented(
    case: Case[Any], live_server: LiveServer, anonymous_server: None
) -> None:
    case.call_and_validate(base_url=live_server.url, excluded_checks=_checks_not_applying(case))


def test_an_undeclared_method_with_a_json_body_gets_405(
    live_server: LiveServer, transactional_db: None
) -> None:
    for path in ("/api/v1/briefing", "/api/v1/messages/pop", "/api/v1/pages/read"):
        answer = requests.put(f"{live_server.url}{path}", json={}, timeout=10)
        assert answer.status_code == 405, path
        assert answer.json()["code"]
        assert "PUT" not in answer.headers["Allow"]


def test_an_undeclared_method_gets_405(live_server: LiveServer, transactional_db: None) -> None:
    answer = requests.put(f"{live_server.url}/api/v1/briefing", timeout=10)
    assert answer.status_code == 405
