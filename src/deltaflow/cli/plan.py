"""``deltaflow plan``: what changed since the last run and what the next one does, writing nothing.

A thin function over :meth:`deltaflow.pipeline.Pipeline.plan`; ``deltaflow.cli.main`` registers it.
"""

from __future__ import annotations

import json

from deltaflow.cli.shared import JsonOption, SpecOption, err, load, say
from deltaflow.runtime.run_log import run_log


def plan(spec: SpecOption = None, as_json: JsonOption = False) -> None:
    """Show what changed since the last run and what the next run rebuilds, refreshes and leaves alone.

    Per dataset: its definition changed, unchanged, new or removed; then what the next run rebuilds in
    full (changed materialized views, unfinished full refreshes and rewinds), refreshes (new input) and
    leaves alone. Writes nothing; needs no JVM when the definitions load without one.
    """
    pipeline = load(spec)
    with run_log(pipeline.layout, pipeline.name, outside=True):  # a JVM's output, if one starts
        result = pipeline.plan()
    for note in pipeline.graph.notes:
        say(f"note: {note}", err)
    if as_json:
        say(json.dumps(result.as_json()))
        return
    for line in result.lines():
        say(line)
    say("\nplan: nothing was written", err)


PLAN_VERBS = (plan,)
