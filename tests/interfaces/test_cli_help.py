"""Help for every option: each argument of every subcommand says what it is, its default
and the values it takes by name, read off the parser that ``kpca-dask --help`` prints."""

from __future__ import annotations

import argparse

import pytest

from kpca_dask.cli.parser import UNSET, build_parser
from kpca_dask.engine.bandwidth import BANDWIDTH_RULES
from kpca_dask.landmarks.strategies import landmark_strategy_names

#: Arguments that take some values by name beside numbers or paths: each name is in the help.
NAMED_VALUES = {"--landmarks": landmark_strategy_names(), "--gamma": BANDWIDTH_RULES,
                "--n-landmarks": ("auto",), "--n-components": ("all",)}
#: argparse's own: -h and --version, and the list of subcommands.
ARGPARSE_OWN = (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)


def _commands(parser: argparse.ArgumentParser):
    """The parser and each subcommand's, by the command line that reaches it."""
    yield parser.prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from ((sub.prog, sub) for sub in action.choices.values())


def _arguments():
    return [(prog, action) for prog, parser in _commands(build_parser())
            for action in parser._actions if not isinstance(action, ARGPARSE_OWN)]


def _name(action: argparse.Action) -> str:
    return max(action.option_strings, key=len) if action.option_strings else action.dest


def problems(action: argparse.Action, prog: str) -> list[str]:
    """What the help of ``action`` fails to say, as argparse prints it (``%(default)s``
    expanded)."""
    if not action.help or action.help == argparse.SUPPRESS:
        return ["no description"]
    text = action.help % {**vars(action), "prog": prog}
    found = []
    takes_value = action.nargs != 0 or action.default is None  # a flag's default is "off"
    if action.option_strings and not action.required and takes_value:
        if "default" not in text.lower():
            found.append("no default")
        default = action.default
        if (default not in (None, UNSET) and isinstance(default, (int, float, str))
                and not isinstance(default, bool) and str(default) not in text):
            found.append(f"the default {default!r} not shown")
    if action.choices is not None and action.metavar is not None:  # argparse lists them only
        found += [f"choice {c!r} not shown" for c in action.choices if str(c) not in text]
    found += [f"value {v!r} not shown" for v in NAMED_VALUES.get(_name(action), ())
              if v not in text]
    return found


@pytest.mark.parametrize("prog, action", _arguments(),
                         ids=[f"{prog.split(' ', 1)[-1]} {_name(a)}" for prog, a in _arguments()])
def test_every_argument_is_described_with_its_default_and_choices(prog, action):
    """Each argument has a description; an option that takes a value says its default (and
    shows the value itself when it has one); the choices and named values are listed."""
    assert not problems(action, prog), f"{prog} {_name(action)}: {problems(action, prog)}"


def test_the_rule_finds_what_is_missing():
    """The walk above reads real help: an undescribed option, a default or a choice left out
    of the help are each reported."""
    parser = argparse.ArgumentParser(prog="demo")
    bare = parser.add_argument("--bare", type=int, default=3)
    hidden = parser.add_argument("--size", type=int, default=3, help="size (default: large)")
    named = parser.add_argument("--mode", choices=("a", "b"), metavar="M", default="a",
                                help="mode (default: %(default)s)")
    assert problems(bare, "demo") == ["no description"]
    assert problems(hidden, "demo") == ["the default 3 not shown"]
    assert problems(named, "demo") == ["choice 'b' not shown"]


def test_the_walk_reaches_every_subcommand():
    """Every subcommand's arguments are read, fit's estimator options among them."""
    progs = {prog for prog, _ in _arguments()}
    assert {f"kpca-dask {name}" for name in ("generate", "fit", "transform", "inverse-transform",
                                            "score", "patterns", "info", "resolve", "update",
                                            "merge")} <= progs
    fit = {_name(action) for prog, action in _arguments() if prog == "kpca-dask fit"}
    assert {"--model", "--kernel", "--coef0", "--landmarks", "--n-landmarks"} <= fit
