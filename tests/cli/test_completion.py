"""``ai-memory completion bash|zsh``: the scripts complete what the parser tree holds, in
the real shells (bash through its completion variables, zsh driven on a terminal)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from aimemory_site.cli.completion import levels
from aimemory_site.cli.main import build_parser
from tests.cli.conftest import RunCli

SHELL_TIMEOUT_SECONDS = 60

# Drives an interactive zsh on a pseudo-terminal: types each line and a Tab, then ^X, a
# widget that appends the completed command line to a file and clears it.
ZSH_DRIVER = r"""
zmodload zsh/zpty
out=$1; setup=$2; shift 2
zpty shell "zsh -f -i"
zpty -w shell "PS1='READY''> '; $setup"
zpty -r shell got '*READY> '
zpty -w shell "dump() { print -r -- \"\$BUFFER\" >> ${(q)out}; BUFFER= }; zle -N dump; bindkey '^X' dump"
zpty -r shell got '*READY> '
integer n=0
for line in "$@"; do
  zpty -w -n shell "${line}"$'\t'
  zpty -w -n shell $'\x18'
  (( n++ ))
  # The shell is another process that reports nothing: wait for its line in the file.
  for i in {1..200}; do
    [[ -f $out && $(wc -l < $out) -ge $n ]] && break
    sleep 0.05
  done
done
zpty -d shell
"""


def script(cli: RunCli, shell: str, tmp_path: Path) -> Path:
    result = cli("completion", shell)
    assert result.returncode == 0, result.stderr
    path = tmp_path / f"ai-memory.{shell}"
    path.write_text(result.stdout)
    return path


def bash_complete(script_path: Path, line: str) -> list[str]:
    """What bash offers for ``line`` (the cursor at its end)."""
    words = line.split(" ")
    program = (
        f"source {shlex.quote(str(script_path))}\n"
        f"COMP_WORDS=({' '.join(shlex.quote(word) for word in words)})\n"
        f"COMP_CWORD={len(words) - 1}\n"
        "_ai_memory\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    result = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", program],
        capture_output=True,
        text=True,
        timeout=SHELL_TIMEOUT_SECONDS,
        check=True,
    )
    assert result.stderr == ""
    return [word for word in result.stdout.splitlines() if word]


@pytest.fixture
def bash_script(offline_cli: RunCli, tmp_path: Path) -> Path:
    return script(offline_cli, "bash", tmp_path)


@pytest.mark.parametrize(
    ("line", "offered"),
    [
        ("ai-memory pa", ["page"]),
        ("ai-memory page w", ["write"]),
        ("ai-memory page write notes/a --pi", ["--pinned"]),
        ("ai-memory message send --to-project page --su", ["--subject"]),
        ("ai-memory message send --to-project ", []),
        ("ai-memory completion ", ["bash", "zsh"]),
        ("ai-memory --ver", ["--version"]),
    ],
)
def test_bash_completes_commands_options_and_values(
    bash_script: Path, line: str, offered: list[str]
) -> None:
    assert bash_complete(bash_script, line) == offered


def test_bash_offers_every_command_and_option_of_the_tree(bash_script: Path) -> None:
    for level in levels(build_parser()):
        prefix = f"ai-memory {level.path}".rstrip()

        subcommands = bash_complete(bash_script, f"{prefix} ")
        options = bash_complete(bash_script, f"{prefix} -")

        assert subcommands == [name for name, _ in level.words()], level.path
        assert options == [flag for option in level.options for flag in option.flags], level.path


def zsh_complete(tmp_path: Path, setup: str, lines: list[str]) -> list[str]:
    """The command lines after zsh completed each of ``lines`` (one Tab each)."""
    driver = tmp_path / "driver.zsh"
    driver.write_text(ZSH_DRIVER)
    out = tmp_path / "completed.txt"
    subprocess.run(
        ["zsh", "-f", str(driver), str(out), setup, *lines],
        capture_output=True,
        timeout=SHELL_TIMEOUT_SECONDS,
        check=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TERM": "dumb"},
    )
    return out.read_text().splitlines() if out.exists() else []


ZSH_LINES = [
    "ai-memory pa",
    "ai-memory page write notes/a --pi",
    "ai-memory message send --to-project pa",
    "ai-memory message send --to-project x --su",
    "ai-memory completion z",
]
ZSH_COMPLETED = [
    "ai-memory page ",
    "ai-memory page write notes/a --pinned ",
    # A value, not a command: nothing to complete.
    "ai-memory message send --to-project pa",
    "ai-memory message send --to-project x --subject ",
    "ai-memory completion zsh ",
]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_completes_when_the_script_is_sourced(offline_cli: RunCli, tmp_path: Path) -> None:
    path = script(offline_cli, "zsh", tmp_path)
    setup = f"autoload -Uz compinit; compinit -u -D; source {shlex.quote(str(path))}"

    assert zsh_complete(tmp_path, setup, ZSH_LINES) == ZSH_COMPLETED


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_completes_when_the_script_is_autoloaded_from_fpath(
    offline_cli: RunCli, tmp_path: Path
) -> None:
    functions = tmp_path / "functions"
    functions.mkdir()
    script(offline_cli, "zsh", tmp_path).rename(functions / "_ai-memory")
    setup = f"fpath=({shlex.quote(str(functions))} $fpath); autoload -Uz compinit; compinit -u -D"

    assert zsh_complete(tmp_path, setup, ZSH_LINES) == ZSH_COMPLETED


def test_an_unknown_shell_is_an_argument_error(offline_cli: RunCli) -> None:
    result = offline_cli("completion", "fish")

    assert result.returncode == 2
    assert "invalid choice: 'fish'" in result.stderr
