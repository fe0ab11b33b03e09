"""Options and positionals may come in any order, for every command of the parser tree.

The commands are enumerated from ``build_parser()``, so a command added later is covered
without a change here.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from aimemory_site.cli.main import build_parser
from tests.cli.conftest import RunCli

# Its arguments are handed to Django's management commands unparsed, in the order given.
PASSED_THROUGH = {("manage",)}

Command = tuple[tuple[str, ...], argparse.ArgumentParser]


def leaf_commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[Command]:
    """Every command that runs (no further subcommand), with its words from the top."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, subparser in action.choices.items():
                yield from leaf_commands(subparser, (*path, name))
            return
    yield path, parser


def _positionals(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [action for action in parser._actions if not action.option_strings]


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        action
        for action in parser._actions
        if action.option_strings and not isinstance(action, argparse._HelpAction)
    ]


def _mixed_commands() -> list[Command]:
    """The commands that take both positionals and options."""
    return [
        (path, parser)
        for path, parser in leaf_commands(build_parser())
        if path not in PASSED_THROUGH and _positionals(parser) and _options(parser)
    ]


def _value(action: argparse.Action, number: int) -> str:
    # Numbers: valid for a typed argument (a limit, a timeout) and distinct for each one,
    # so a value that lands in the wrong argument shows.
    return str(next(iter(action.choices))) if action.choices else str(number)


def _option_words(options: list[argparse.Action]) -> list[list[str]]:
    words = []
    for number, action in enumerate(options, start=21):
        flag = action.option_strings[-1]
        words.append([flag] if action.nargs == 0 else [flag, _value(action, number)])
    return words


def _positional_words(positionals: list[argparse.Action]) -> list[str]:
    return [_value(action, number) for number, action in enumerate(positionals, start=11)]


def _orders(positionals: list[str], options: list[list[str]]) -> dict[str, list[str]]:
    flat_options = [word for option in options for word in option]
    interleaved: list[str] = []
    for index, positional in enumerate(positionals):
        interleaved.append(positional)
        if index < len(options):
            interleaved += options[index]
    interleaved += [word for option in options[len(positionals) :] for word in option]
    return {
        "positionals last": flat_options + positionals,
        "positionals first": positionals + flat_options,
        "options between the positionals": positionals[:1] + flat_options + positionals[1:],
        "options after each positional": interleaved,
    }


def test_the_tree_has_commands_with_an_optional_positional() -> None:
    optional_positional = {
        " ".join(path)
        for path, parser in _mixed_commands()
        if any(action.nargs == "?" for action in _positionals(parser))
    }

    assert {"page write", "handoff create", "message send"} <= optional_positional


@pytest.mark.parametrize(
    ("path", "parser"),
    [pytest.param(path, parser, id=" ".join(path)) for path, parser in _mixed_commands()],
)
def test_options_and_positionals_parse_alike_in_any_order(
    path: tuple[str, ...], parser: argparse.ArgumentParser
) -> None:
    positionals = _positional_words(_positionals(parser))
    options = _option_words(_options(parser))
    orders = _orders(positionals, options)
    top = build_parser()

    parsed = {name: vars(top.parse_args([*path, *words])) for name, words in orders.items()}

    expected = parsed["positionals last"]
    for action, value in zip(_positionals(parser), positionals, strict=True):
        assert str(expected[action.dest]) == value
    for name, namespace in parsed.items():
        assert namespace == expected, f"{' '.join(path)}: {name}: {orders[name]}"


def test_a_body_after_an_option_reaches_the_page_command(offline_cli: RunCli) -> None:
    result = offline_cli("page", "write", "notes/cli", "--json", "the body")

    # Parsed, so it got as far as calling the (absent) server.
    assert result.returncode == 1, result.stderr
    assert "cannot reach ai-memory server" in result.stderr


def test_a_double_dash_still_makes_a_dash_word_the_body() -> None:
    args = build_parser().parse_args(["page", "write", "notes/cli", "--pinned", "--", "--draft--"])

    assert (args.path, args.body, args.pinned) == ("notes/cli", "--draft--", True)


def test_an_unknown_option_is_still_an_argument_error(offline_cli: RunCli) -> None:
    result = offline_cli("page", "write", "notes/cli", "--pinnned", "body")

    assert result.returncode == 2
    assert "unrecognized arguments: --pinnned" in result.stderr
