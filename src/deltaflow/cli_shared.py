"""What every ``deltaflow`` verb shares: the consoles, ``--spec`` and ``--json``, loading the pipeline."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

if TYPE_CHECKING:
    from deltaflow.pipeline import Pipeline

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)

SpecOption = Annotated[Path | None, typer.Option("--spec", help="deltaflow.yml, or a folder holding one "
                                                 "(default: the nearest one from the current folder up).")]
JsonOption = Annotated[bool, typer.Option("--json", help="JSON instead of a table.")]


def say(text: str, console: Console = out) -> None:
    """Print ``text`` as it is (no markup, no wrapping)."""
    console.print(text, markup=False, soft_wrap=True, highlight=False)


def load(spec: Path | None) -> Pipeline:
    """The pipeline of ``--spec`` (default: the nearest ``deltaflow.yml`` upward)."""
    from deltaflow.pipeline import Pipeline

    return Pipeline.load(spec)
