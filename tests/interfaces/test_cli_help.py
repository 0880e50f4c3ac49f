"""Help for every option: each argument of every subcommand says what it is, its default
and the values it takes by name, read off the parser that ``kpca-dask --help`` prints; the
parser's copies of the library's tables equal them; and the parser loads none of the
library's heavy modules, so that ``--help`` answers at once."""

from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys

import pytest

from kpca_dask.cli import parser as cli_parser
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


def test_the_parsers_copies_equal_the_librarys_tables():
    """The names and defaults the parser offers, written there so that it imports none of
    the library, are the library's own."""
    from kpca_dask import ExtendedKernelEOF, HilbertKernelEOF, KernelCCA, KernelPCA
    from kpca_dask.blocks.kernels import KERNEL_NAMES
    from kpca_dask.dask_client import LOCAL_CLUSTER
    from kpca_dask.datasets import DATASETS
    from kpca_dask.io.formats import FORMATS
    from kpca_dask.io.preprocessing.analytic_signal import PADDINGS
    from kpca_dask.landmarks.strategies import _BUILT_IN
    from kpca_dask.model.parameters import EIGEN_SOLVERS, SOLVERS

    signature = {name: parameter.default
                 for name, parameter in inspect.signature(KernelPCA).parameters.items()}
    assert dict(cli_parser.LIBRARY_DEFAULTS) == {
        name: signature[name] for name in cli_parser.LIBRARY_DEFAULTS}
    # --method nystrom is the landmark way by its name: no --solver for it
    assert set(signature) - set(cli_parser.LIBRARY_DEFAULTS) == {"max_landmarks", "rcond",
                                                                 "solver"}
    assert cli_parser.KERNEL_NAMES == KERNEL_NAMES
    assert cli_parser.DATASETS == DATASETS
    assert cli_parser.BANDWIDTH_RULES == BANDWIDTH_RULES
    assert cli_parser.FORMATS == FORMATS
    assert cli_parser.LANDMARK_STRATEGIES == tuple(sorted(_BUILT_IN))
    assert cli_parser.EIGEN_SOLVERS == EIGEN_SOLVERS
    assert cli_parser.SOLVERS == SOLVERS and cli_parser.PADDINGS == PADDINGS
    for estimator in (HilbertKernelEOF, ExtendedKernelEOF):
        defaults = {name: parameter.default
                    for name, parameter in inspect.signature(estimator).parameters.items()}
        assert {name: defaults[name] for name in cli_parser.EOF_DEFAULTS if name in defaults} \
            == {name: cli_parser.EOF_DEFAULTS[name] for name in cli_parser.EOF_DEFAULTS
                if name in defaults}
    assert cli_parser.EOF_DEFAULTS["epsilon"] == inspect.signature(
        KernelCCA).parameters["epsilon"].default
    assert LOCAL_CLUSTER not in cli_parser.LOCAL_SCHEDULERS


#: Modules that take seconds to import between them: the parser must load none of them.
HEAVY = ("sklearn", "dask.array", "dask.dataframe", "xarray", "distributed", "scipy", "pandas",
         "zarr", "numpy", "kpca_dask.estimators", "kpca_dask.model", "kpca_dask.engine",
         "kpca_dask.io", "kpca_dask.cli.commands", "kpca_dask.cli.compute")
_LOADED = """
import json, sys
from kpca_dask.cli import main
for argv in ([], *([name] for name in {commands!r})):
    try:
        main([*argv, "--help"])
    except SystemExit:
        pass
print(json.dumps(sorted(sys.modules)))
"""


def test_help_imports_nothing_heavy():
    """`kpca-dask --help` and every subcommand's --help, in a fresh interpreter, import the
    parser and no estimator, scikit-learn, dask.array, xarray, distributed or numpy: the
    commands' modules load when a command runs."""
    commands = sorted(dict(next(a for a in build_parser()._actions
                                if isinstance(a, argparse._SubParsersAction)).choices))
    done = subprocess.run([sys.executable, "-c", _LOADED.format(commands=commands)],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "100"})
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    heavy = sorted(m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY))
    assert "kpca_dask.cli.parser" in loaded and not heavy, f"--help imported {heavy}"
    assert "usage: kpca-dask fit" in done.stdout and "usage: kpca-dask merge" in done.stdout
