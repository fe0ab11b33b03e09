"""The walls of the house: each router imports on its own, and import-linter's layer
contracts (``[tool.importlinter]`` in ``pyproject.toml``) fail when a wall is broken."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("aimemory_site", "projects", "messaging", "webui")
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _python(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "aimemory_site.settings"}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True
    )


@pytest.mark.parametrize(
    "module",
    [
        "messaging.api",
        "projects.api",
        "aimemory_site.onstart.api",
        "webui.views",
        "aimemory_site.mcp.views",
    ],
)
def test_a_router_imports_on_its_own_after_setup(module: str) -> None:
    done = _python(f"import django; django.setup(); import {module}")

    assert done.returncode == 0, done.stderr


def test_the_cli_client_loads_no_django() -> None:
    done = _python(
        "import sys; import aimemory_site.cli.main; "
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('django', 'projects', 'messaging', 'webui')); print(loaded); assert not loaded"
    )

    assert done.returncode == 0, done.stdout + done.stderr


def _lint_imports_on_a_copy(tmp_path: Path, edit: tuple[str, str] | None) -> str:
    """Run import-linter on a copy of the packages, with one line added to one file."""
    for package in PACKAGES:
        shutil.copytree(REPO_ROOT / package, tmp_path / package)
    shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    if edit is not None:
        path, line = edit
        target = tmp_path / path
        target.write_text(target.read_text() + f"\n{line}\n")
    done = subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
    )
    return f"exit {done.returncode}\n{done.stdout}{done.stderr}"


def test_the_contracts_hold_on_the_code_as_it_is(tmp_path: Path) -> None:
    output = _lint_imports_on_a_copy(tmp_path, None)

    assert output.startswith("exit 0"), output


@pytest.mark.parametrize(
    ("path", "line", "contract"),
    [
        ("projects/models.py", "import messaging.models", "Layers"),
        ("messaging/services.py", "import webui.selectors", "Layers"),
        ("aimemory_site/lib/errors.py", "import projects.models", "The library imports no app"),
        ("aimemory_site/cli/messages.py", "import django.conf", "CLI client commands"),
        ("aimemory_site/cli/scope.py", "import projects.scope", "CLI client commands"),
        ("messaging/services.py", "import aimemory_site.middleware", "The apps and the library"),
        (
            "projects/services.py",
            "import aimemory_site.rate_limit_middleware",
            "The apps and the library",
        ),
        (
            "aimemory_site/lib/errors.py",
            "import aimemory_site.settings",
            "The apps and the library",
        ),
        ("projects/services.py", "import aimemory_site.onstart.services", "Layers"),
        ("messaging/selectors.py", "import aimemory_site.onstart.selectors", "Layers"),
        ("aimemory_site/lib/decisions.py", "import django.conf", "The decisions parser"),
    ],
    ids=[
        "projects-up-to-messaging",
        "messaging-up-to-webui",
        "lib-to-app",
        "cli-django",
        "cli-app",
        "messaging-to-middleware",
        "projects-to-rate-limit-middleware",
        "lib-to-settings",
        "projects-up-to-onstart",
        "messaging-up-to-onstart",
        "decisions-parser-django",
    ],
)
def test_a_forbidden_import_breaks_its_contract(
    tmp_path: Path, path: str, line: str, contract: str
) -> None:
    output = _lint_imports_on_a_copy(tmp_path, (path, line))

    assert output.startswith("exit 1"), output
    broken = [row for row in output.splitlines() if row.endswith("BROKEN") or " BROKEN " in row]
    assert any(row.startswith(contract) for row in broken), output


def _contract_modules() -> set[str]:
    """Every module a contract in ``pyproject.toml`` names, as a layer or a source or
    forbidden module."""
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    named: set[str] = set()
    for contract in config["tool"]["importlinter"]["contracts"]:
        for layer in contract.get("layers", []):
            named.update(part.strip() for part in layer.replace(":", "|").split("|"))
        named.update(contract.get("source_modules", []))
        named.update(contract.get("forbidden_modules", []))
    return named


def _modules_of(package: str) -> list[str]:
    root = REPO_ROOT / package
    found = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(REPO_ROOT).with_suffix("").parts
        if "migrations" in parts:
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found.append(".".join(parts))
    return found


def test_every_module_sits_inside_a_contract() -> None:
    """A module no contract names could import anything: each one (or a package above it
    other than the root ``aimemory_site``) is a layer or a contract's module."""
    named = _contract_modules() - {"aimemory_site"}
    loose = [
        module
        for package in PACKAGES
        for module in _modules_of(package)
        if module != "aimemory_site"
        and not any(module == name or module.startswith(name + ".") for name in named)
    ]

    assert loose == [], loose


def test_no_contract_ignores_an_import() -> None:
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]

    assert [c["name"] for c in contracts if c.get("ignore_imports")] == []
