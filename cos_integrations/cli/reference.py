"""The ``cos`` command line as one Click command, for the documentation site's generated CLI
reference (``mkdocs-click`` reads :data:`command`); nothing at run time imports this.

Examples:
    >>> from cos_integrations.cli.reference import command
    >>> "query" in command.commands
    True
"""

from __future__ import annotations

import typer

from cos_integrations.cli import app

__all__ = ["command"]

command = typer.main.get_command(app)
