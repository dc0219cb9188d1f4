"""The ``cos`` command line: ingest, query, refine, serve-local, eval, ui and the admin commands.

Run ``cos --help`` or ``cos COMMAND --help``. Exit codes: 0 success, 1 some work failed
(per-file errors, failed documents), 2 usage errors. The commands live in
:mod:`.commands`, :mod:`.admin`, :mod:`.evaluate` and :mod:`.ui`, each on its own Typer app; this
module joins them into one; what they share is in :mod:`.common`.

Examples:
    >>> from typer.testing import CliRunner                       # doctest: +SKIP
    >>> CliRunner().invoke(app, ["stats", "--index", "index"])     # doctest: +SKIP
"""

from __future__ import annotations

import typer

from cos_integrations.cli import admin, commands, evaluate, ui

__all__ = ["app", "main"]

app = typer.Typer(
    help="Chain of Summaries: dense, question-tested summaries as a cache in front of full text.",
    no_args_is_help=True,
    add_completion=False,
)
for _commands in (commands.app, evaluate.app, admin.app, ui.app):
    app.add_typer(_commands)


def main() -> None:
    """Entry point of the ``cos`` script (and of ``python -m cos_integrations.cli``)."""
    app()
