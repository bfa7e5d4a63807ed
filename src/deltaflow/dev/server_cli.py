"""What the local servers' commands share (``deltaflow kafka|s3|cluster start|stop|status``).

Examples:
    >>> answer_status(True, {"running": True, "port": 19000}, "s3: running")  # doctest: +SKIP
    s3: running

"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from deltaflow.cli.shared import say

JsonOption = Annotated[bool, typer.Option("--json", help="JSON instead of a line of text.")]


def answer_status(running: bool, fields: dict[str, Any], line: str, as_json: bool = False) -> None:
    """Print a server's state (``fields`` as JSON, or ``line``), then exit 1 when it is not running.

    Raises:
        typer.Exit: With code 1, when the server is not running.

    """
    say(json.dumps(fields) if as_json else line)
    if not running:
        raise typer.Exit(1)
