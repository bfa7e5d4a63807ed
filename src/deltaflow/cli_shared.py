"""What every ``deltaflow`` verb shares: the consoles, ``--spec`` and ``--json``, loading the pipeline."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

if TYPE_CHECKING:
    from deltaflow.pipeline import Pipeline
    from deltaflow.ui.app import UiServer

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)

SpecOption = Annotated[Path | None, typer.Option("--spec", help="deltaflow.yml (or an SDP "
                                                 "spark-pipeline.yml), or a folder holding one (default: the "
                                                 "nearest one from the current folder up).")]
JsonOption = Annotated[bool, typer.Option("--json", help="JSON instead of a table.")]
UiPortOption = Annotated[int | None, typer.Option("--port", help="The dashboard's port (default 8787; 0: any "
                                                  "free one).", min=0, max=65535)]


def say(text: str, console: Console = out) -> None:
    """Print ``text`` as it is (no markup, no wrapping)."""
    console.print(text, markup=False, soft_wrap=True, highlight=False)


def load(spec: Path | None, reading: bool = False) -> Pipeline:
    """The pipeline of ``--spec`` (default: the nearest ``deltaflow.yml`` upward).

    ``reading``: the verb only reads the storage; it needs no secret but the storage's.
    """
    from deltaflow.pipeline import Pipeline

    return Pipeline.load(spec, reading=reading)


def start_ui(pipeline: Pipeline, host: str = "127.0.0.1", port: int | None = None,
             console: Console = err) -> UiServer:
    """Start ``pipeline``'s dashboard, print its address (and a warning when it is not on loopback)."""
    import ipaddress

    server = pipeline.serve_ui(host, port)
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        say(f"warning: the dashboard listens on {host}: anyone who can reach it sees the pipeline's state "
            "(read-only, no secrets)", console)
    say(f"dashboard: {server.url}  (metrics: {server.url}metrics)", console)
    return server
