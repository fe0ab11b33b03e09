"""``ai-memory completion bash|zsh``: a shell completion script, generated from the argument
parser itself, so every command and option the CLI has is completed and none it lacks.

The script holds the parser tree as ``case`` tables (one per question: which words are
subcommands here, which options, which option takes a value and which values), and a
small function that walks the words typed so far through them. Plain ``case`` keeps it to
what bash 3.2 (macOS) and zsh both have.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from aimemory_site.cli.help_text import SubParsers, add_command

SHELLS = ("bash", "zsh")


@dataclass(frozen=True)
class Option:
    flags: tuple[str, ...]
    help: str
    takes_value: bool
    choices: tuple[str, ...]


@dataclass(frozen=True)
class Level:
    """One parser of the tree: the command words that lead to it, its subcommands and
    its options."""

    path: str
    subcommands: tuple[tuple[str, str], ...]
    options: tuple[Option, ...]
    # The fixed values of its positionals (``completion bash|zsh``), completed like
    # subcommands but not commands themselves.
    positional_choices: tuple[str, ...] = ()

    def words(self) -> list[tuple[str, str]]:
        """What may follow the command words: subcommands, or positional values."""
        return [*self.subcommands, *((choice, "") for choice in self.positional_choices)]


def _one_line(text: str | None) -> str:
    return " ".join((text or "").split())


def levels(parser: argparse.ArgumentParser, path: str = "") -> Iterator[Level]:
    """Every parser of the tree, the top one first."""
    subcommands: list[tuple[str, str]] = []
    children: list[tuple[str, argparse.ArgumentParser]] = []
    options: list[Option] = []
    positional_choices: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, subparser in action.choices.items():
                subcommands.append((name, _one_line(helps.get(name))))
                children.append((name, subparser))
        elif action.option_strings:
            help_text = "" if action.help == argparse.SUPPRESS else _one_line(action.help)
            options.append(
                Option(
                    flags=tuple(action.option_strings),
                    help=help_text,
                    takes_value=action.nargs != 0,
                    choices=tuple(str(choice) for choice in action.choices or ()),
                )
            )
        elif action.choices:
            positional_choices += [str(choice) for choice in action.choices]
    yield Level(path, tuple(subcommands), tuple(options), tuple(positional_choices))
    for name, subparser in children:
        yield from levels(subparser, f"{path} {name}".strip())


def _quoted(text: str) -> str:
    """``text`` as one single-quoted shell word."""
    return "'" + text.replace("'", "'\\''") + "'"


def _case(
    subject: str, arms: Sequence[tuple[Sequence[str], str]], default: str, indent: str = "    "
) -> list[str]:
    """A ``case`` statement: each arm's patterns (literal words) and its body."""
    lines = [f"{indent}case {subject} in"]
    for patterns, body in arms:
        lines.append(f"{indent}    {'|'.join(_quoted(p) for p in patterns)}) {body} ;;")
    lines.append(f"{indent}    *) {default} ;;")
    lines.append(f"{indent}esac")
    return lines


def _function(name: str, body: list[str]) -> list[str]:
    return [f"{name}() {{", *body, "}", ""]


def _value_arms(
    tree: Sequence[Level], values: Callable[[Option], str]
) -> list[tuple[list[str], str]]:
    """The ``case`` arms of the options that take a value, keyed ``path option``."""
    arms = []
    for level in tree:
        for option in level.options:
            if option.takes_value:
                keys = [f"{level.path} {flag}" for flag in option.flags]
                arms.append((keys, values(option)))
    return arms


def _subcommand_arms(tree: Sequence[Level]) -> list[tuple[list[str], str]]:
    keys = [f"{level.path} {name}" for level in tree for name, _ in level.subcommands]
    return [(keys, "return 0")] if keys else []


def bash_script(tree: Sequence[Level]) -> str:
    words = [
        (
            [level.path],
            "printf '%s\\n' " + " ".join(_quoted(name) for name, _ in level.words()),
        )
        for level in tree
        if level.words()
    ]
    options = [
        (
            [level.path],
            "printf '%s\\n' "
            + " ".join(_quoted(flag) for option in level.options for flag in option.flags),
        )
        for level in tree
        if level.options
    ]
    value_arms = _value_arms(
        tree, lambda option: "printf '%s\\n' " + " ".join(map(_quoted, option.choices))
    )
    lines = [
        "# bash completion for ai-memory, generated by `ai-memory completion bash`.",
        "# Load it in ~/.bashrc with: source <(ai-memory completion bash)",
        "",
        "# $1: the command words so far; the words that continue them.",
        *_function("_ai_memory_subcommands", _case('"$1"', words, ":")),
        *_function("_ai_memory_options", _case('"$1"', options, ":")),
        "# $1 $2: command words and an option; prints its choices, fails when it takes no value.",
        *_function("_ai_memory_values", _case('"$1 $2"', value_arms, "return 1")),
        *_function(
            "_ai_memory_is_subcommand", _case('"$1 $2"', _subcommand_arms(tree), "return 1")
        ),
        *_function(
            "_ai_memory",
            [
                '    local cur="${COMP_WORDS[COMP_CWORD]}" command="" word values i',
                "    for ((i = 1; i < COMP_CWORD; i++)); do",
                '        word="${COMP_WORDS[i]}"',
                "        if [[ $word == -* ]]; then",
                '            if values="$(_ai_memory_values "$command" "$word")"; then',
                "                if ((i + 1 == COMP_CWORD)); then",
                '                    COMPREPLY=($(compgen -W "$values" -- "$cur"))',
                "                    return",
                "                fi",
                "                ((i++))",
                "            fi",
                '        elif _ai_memory_is_subcommand "$command" "$word"; then',
                '            command="${command:+$command }$word"',
                "        fi",
                "    done",
                "    if [[ $cur == -* ]]; then",
                '        COMPREPLY=($(compgen -W "$(_ai_memory_options "$command")" -- "$cur"))',
                "    else",
                '        COMPREPLY=($(compgen -W "$(_ai_memory_subcommands "$command")" -- "$cur"))',
                "    fi",
            ],
        ),
        "complete -F _ai_memory ai-memory",
    ]
    return "\n".join(lines) + "\n"


def _described(name: str, help_text: str) -> str:
    # _describe splits "name:description" at the first unescaped colon.
    return _quoted(f"{name.replace(':', chr(92) + ':')}:{help_text}" if help_text else name)


def zsh_script(tree: Sequence[Level]) -> str:
    words = [
        (
            [level.path],
            "reply=(" + " ".join(_described(name, text) for name, text in level.words()) + ")",
        )
        for level in tree
        if level.words()
    ]
    options = [
        (
            [level.path],
            "reply=("
            + " ".join(
                _described(flag, option.help) for option in level.options for flag in option.flags
            )
            + ")",
        )
        for level in tree
        if level.options
    ]
    value_arms = _value_arms(
        tree, lambda option: "reply=(" + " ".join(map(_quoted, option.choices)) + ")"
    )
    lines = [
        "#compdef ai-memory",
        "# zsh completion for ai-memory, generated by `ai-memory completion zsh`.",
        "# Load it in ~/.zshrc, after compinit, with: source <(ai-memory completion zsh)",
        "# or save it as _ai-memory in a directory of $fpath.",
        "",
        *_function("_ai_memory_subcommands", _case('"$1"', words, "reply=()")),
        *_function("_ai_memory_options", _case('"$1"', options, "reply=()")),
        *_function("_ai_memory_values", _case('"$1 $2"', value_arms, "return 1")),
        *_function(
            "_ai_memory_is_subcommand", _case('"$1 $2"', _subcommand_arms(tree), "return 1")
        ),
        *_function(
            "_ai-memory",
            [
                "    local command='' word i",
                "    local -a reply",
                "    for ((i = 2; i < CURRENT; i++)); do",
                "        word=${words[i]}",
                "        if [[ $word == -* ]]; then",
                '            if _ai_memory_values "$command" "$word"; then',
                "                if ((i + 1 == CURRENT)); then",
                "                    (( $#reply )) && compadd -a reply",
                "                    return",
                "                fi",
                "                ((i++))",
                "            fi",
                '        elif _ai_memory_is_subcommand "$command" "$word"; then',
                '            command="${command:+$command }$word"',
                "        fi",
                "    done",
                "    if [[ ${words[CURRENT]} == -* ]]; then",
                '        _ai_memory_options "$command"',
                "        (( $#reply )) && _describe -t options option reply",
                "    else",
                '        _ai_memory_subcommands "$command"',
                "        (( $#reply )) && _describe -t commands command reply",
                "    fi",
            ],
        ),
        "compdef _ai-memory ai-memory",
        "# Autoloaded from $fpath, this file is the body of _ai-memory: complete now.",
        'if [[ "${funcstack[1]}" == _ai-memory ]]; then',
        '    _ai-memory "$@"',
        "fi",
    ]
    return "\n".join(lines) + "\n"


def completion_script(shell: str, parser: argparse.ArgumentParser) -> str:
    tree = list(levels(parser))
    return bash_script(tree) if shell == "bash" else zsh_script(tree)


def run_completion(args: argparse.Namespace) -> int:
    print(completion_script(args.shell, args.parser_tree), end="")
    return 0


def add_parser(subparsers: SubParsers, tree: argparse.ArgumentParser) -> None:
    """Add ``completion``, which completes the commands of ``tree`` (the top parser)."""
    completion = add_command(
        subparsers,
        "completion",
        summary="print a shell completion script (bash or zsh)",
        paragraphs=[
            "Print a completion script for bash or zsh that completes the commands, their "
            "options and the options' fixed values. Load it from the shell's start-up file; "
            "it is generated from this ai-memory, so load it again after an upgrade."
        ],
        examples=[
            "source <(ai-memory completion bash)    # in ~/.bashrc",
            "source <(ai-memory completion zsh)     # in ~/.zshrc, after compinit",
        ],
    )
    completion.add_argument("shell", choices=SHELLS, help="the shell: bash or zsh")
    completion.set_defaults(handler=run_completion, command_parser=completion, parser_tree=tree)
