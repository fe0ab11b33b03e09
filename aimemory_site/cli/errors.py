"""The CLI's two kinds of failure: exit 1 (runtime) and exit 2 (arguments)."""

from __future__ import annotations


class CliError(Exception):
    """A runtime failure; ``str()`` is the one line printed to stderr before exit 1."""


class UsageError(Exception):
    """Arguments that argparse accepted but the command cannot use; exit 2 with usage."""
