"""Sphinx directive ``kpca-dask-cli``: the command-line reference, from the parser itself.

It renders ``kpca_dask.cli.build_parser()``'s help and then each subcommand's, one
section per subcommand, so the reference follows the parser as commands and options
are added.
"""

from __future__ import annotations

import argparse
import os

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

#: Width the help is wrapped to, whatever terminal builds the pages.
HELP_WIDTH = "88"


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommand parsers of ``parser``, in the order they were added."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _help(parser: argparse.ArgumentParser) -> str:
    # argparse wraps to $COLUMNS; fix it so the pages do not depend on the build terminal
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_WIDTH
    try:
        return parser.format_help()
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved


class CLIReference(SphinxDirective):
    """``.. kpca-dask-cli::`` — the main help, then one section per subcommand."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        from kpca_dask.cli import build_parser

        parser = build_parser()
        result: list[nodes.Node] = [self._block(_help(parser))]
        for name, sub in _subcommands(parser).items():
            section = nodes.section(ids=[nodes.make_id(f"{parser.prog} {name}")])
            section += nodes.title(text=f"{parser.prog} {name}")
            section += self._block(_help(sub))
            result.append(section)
        return result

    def _block(self, text: str) -> nodes.literal_block:
        block = nodes.literal_block(text, text)
        block["language"] = "text"
        return block


def setup(app: Sphinx) -> dict:
    app.add_directive("kpca-dask-cli", CLIReference)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
