"""The analysing verbs of ``deltaflow``: ``dry-run`` and ``graph`` resolve the pipeline, write nothing.

``deltaflow.cli.main`` registers them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from deltaflow.cli.progress import plural
from deltaflow.cli.shared import JsonOption, SpecOption, err, load, say
from deltaflow.runtime.run_log import run_log

if TYPE_CHECKING:
    from deltaflow.pipeline import Pipeline


def _analyse(spec: Path | None, form: str, *, dry_run: bool) -> None:
    from deltaflow.cli.render import FORMATS

    pipeline = load(spec)
    if not dry_run and (recorded := _recorded(pipeline)) is not None:
        say(FORMATS[form](recorded))
        return
    if not dry_run:
        say("graph: the definitions changed since the last run (or none ran): resolving them on Spark", err)
    with run_log(pipeline.layout, pipeline.name, outside=True):  # Spark's output, not the terminal's
        resolver = pipeline.dry_run()
    for warning in resolver.warnings:
        say(f"warning: {warning}", err)
    for line in pipeline.definition_notes():
        say(line, err)
    for note in resolver.graph.notes:
        say(f"note: {note}", err)
    say(FORMATS[form](resolver))
    if dry_run and form == "text":
        stored = sum(1 for d in resolver.graph.datasets.values() if d.stored)
        say(f"\ndry-run: ok, {plural(len(resolver.graph.datasets), 'dataset')} ({stored} stored), "
             f"{plural(len(resolver.graph.flows), 'flow')} analysed; nothing was written")


def _recorded(pipeline: Pipeline) -> dict[str, Any] | None:
    """The graph the last run recorded, when the definitions and the spec are still the ones it ran."""
    from deltaflow.observe.graph_picture import drawable
    from deltaflow.observe.graph_record import read_graph_record

    record = read_graph_record(pipeline.layout)
    if record is None or record.get("fingerprint") != pipeline.fingerprint() or not drawable(record):
        return None
    return {"datasets": record["datasets"]}


def dry_run(spec: SpecOption = None, as_json: JsonOption = False) -> None:
    """Resolve and analyse the whole pipeline without writing a byte; exit 1 on the first problem.

    Needs no running Kafka broker: an unreachable one is a warning here, an error at 'run'.
    """
    _analyse(spec, "json" if as_json else "text", dry_run=True)


def graph(
    spec: SpecOption = None,
    form: Annotated[str, typer.Option("--format", "-f", help="text, json, mermaid or dot.")] = "text",
) -> None:
    """Print the dataset graph: what each dataset reads, as text, JSON, Mermaid or Graphviz DOT.

    Without Spark when the definitions and the spec are the ones the last run resolved (it recorded its
    graph); otherwise they are resolved first, as by 'dry-run'.
    """
    from deltaflow.cli.render import FORMATS

    if form not in FORMATS:
        raise typer.BadParameter(f"'{form}' is not one of {', '.join(FORMATS)}", param_hint="--format")
    _analyse(spec, form, dry_run=False)


ANALYSE_VERBS = (dry_run, graph)
