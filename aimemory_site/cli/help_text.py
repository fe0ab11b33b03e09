"""Help pages: wrapped prose, then examples kept exactly as typed."""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Sequence
from typing import TypeAlias

HELP_WIDTH = 78

# A string: the class is generic only to type checkers, not at run time.
SubParsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def scope_help(flags: str = "--workspace/--project") -> str:
    return (
        f"The current project is {flags}, else the nearest .ai-memory.toml at or above the "
        "working directory, else workspace 'default' and the name of the git repository "
        "(its main worktree) or of the directory."
    )


def describe(paragraphs: Sequence[str], examples: Sequence[str]) -> str:
    prose = [textwrap.fill(paragraph, width=HELP_WIDTH) for paragraph in paragraphs]
    example_block = "examples:\n" + "\n".join(f"  {example}" for example in examples)
    return "\n\n".join([*prose, example_block])


def add_command(
    subparsers: SubParsers,
    name: str,
    *,
    summary: str,
    paragraphs: Sequence[str],
    examples: Sequence[str],
) -> argparse.ArgumentParser:
    return subparsers.add_parser(
        name,
        help=summary,
        description=describe(paragraphs, examples),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
