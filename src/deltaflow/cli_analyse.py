"""The analysing verbs of ``deltaflow``: ``dry-run`` and ``graph`` resolve the pipeline, write nothing.

``deltaflow.cli`` registers them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from deltaflow.cli_shared import JsonOption, SpecOption, err, load, say


def _analyse(spec: Path | None, form: str) -> None:
    from deltaflow.render import FORMATS

    pipeline = load(spec)
    resolver = pipeline.dry_run()
    for warning in resolver.warnings:
        say(f"warning: {warning}", err)
    for line in pipeline.definition_notes():
        say(line, err)
    for note in resolver.graph.notes:
        say(f"note: {note}", err)
    say(FORMATS[form](resolver))
    if form == "text":
        stored = sum(1 for d in resolver.graph.datasets.values() if d.stored)
        say(f"\ndry-run: ok, {len(resolver.graph.datasets)} dataset(s) ({stored} stored), "
             f"{len(resolver.graph.flows)} flow(s) analysed; nothing was written")


def dry_run(spec: SpecOption = None, as_json: JsonOption = False) -> None:
    """Resolve and analyse the whole pipeline without writing a byte; exit 1 on the first problem.

    Needs no running Kafka broker: an unreachable one is a warning here, an error at 'run'.
    """
    _analyse(spec, "json" if as_json else "text")


def graph(
    spec: SpecOption = None,
    form: Annotated[str, typer.Option("--format", "-f", help="text, json, mermaid or dot.")] = "text",
    as_json: JsonOption = False,
) -> None:
    """Print the dataset graph: what each dataset reads, as text, JSON, Mermaid or Graphviz DOT."""
    from deltaflow.render import FORMATS

    if form not in FORMATS:
        raise typer.BadParameter(f"'{form}' is not one of {', '.join(FORMATS)}", param_hint="--format")
    if as_json and form not in ("text", "json"):
        raise typer.BadParameter(f"--json and --format {form}: give one", param_hint="--json")
    _analyse(spec, "json" if as_json else form)


ANALYSE_VERBS = (dry_run, graph)
