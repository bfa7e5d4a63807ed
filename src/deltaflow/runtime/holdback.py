"""How a run's flows ended, and rule 13: a failed flow holds back its readers for that run.

A flow whose upstream flow failed in this run (directly or through other skipped flows, whatever the read:
stream, batch, through temporary views) is not started: it ends ``skipped``, naming the failed flow, and the
next run starts it as usual. A failure is a flow's query ending with an error, a flow failing to start, a
carried flow failing in its carrier's query, or a full refresh failing (:func:`refresh`). A reader already
running (a continuous run starts its flows at once) goes on: it reads only committed Delta versions. The
run's :class:`~deltaflow.errors.FlowError` names the failed flows and the skipped ones.

Examples:
    >>> outcomes = [FlowOutcome("silver", "defs.py:9", "failed", "boom"),
    ...             skipped("gold", "defs.py:20", "silver")]
    >>> outcomes[1].error
    "upstream 'silver' failed"
    >>> str(run_failure(outcomes))
    "DF-FLOW 1 flow failed: 'silver' (defs.py:9): boom; skipped downstream: 'gold'"

"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING

from deltaflow.errors import FlowError, first_line
from deltaflow.runtime.outcomes import FlowOutcome
from deltaflow.runtime.refresh import refresh_dataset

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery

    from deltaflow.define.graph import PipelineGraph
    from deltaflow.sinks.writer import FlowWriters


def skipped(flow: str, location: str, upstream: str) -> FlowOutcome:
    """``flow``'s outcome when it is not started because ``upstream`` failed in this run."""
    return FlowOutcome(flow, location, "skipped", f"upstream '{upstream}' failed", upstream=upstream)


def failed_upstream(upstream: Iterable[str], finished: Mapping[str, FlowOutcome],
                    queries: Mapping[str, StreamingQuery]) -> str | None:
    """The flow that failed in this run among ``upstream`` (a reader's input flows), or behind them.

    A skipped input names the failed flow it was skipped for, so the answer is transitive. A query that
    ended with an error counts once the run has looked at it (and did not restart it).
    """
    for name in upstream:
        outcome = finished.get(name)
        if outcome is not None and outcome.state in ("failed", "skipped"):
            return outcome.upstream or outcome.flow
        query = queries.get(name)
        if outcome is None and query is not None and not query.isActive and query.exception() is not None:
            return name
    return None


def refresh(writers: FlowWriters, dataset: str, finished: Mapping[str, FlowOutcome],
            upstream_of: Callable[[str], Iterable[tuple[str, object]]]) -> dict[str, FlowOutcome]:
    """Fully refresh ``dataset`` unless a flow it reads failed; the outcomes of its flows that will not run.

    Its flows are skipped when an upstream flow (``upstream_of(flow)``: its input flows) failed or was
    skipped; they fail when its refresh fails, whose record stays so that the next run carries it out.
    """
    flows = writers.resolver.graph.flows_into(dataset)
    held = failed_upstream((u for f in flows for u, _ in upstream_of(f.name)), finished, {})
    if held is not None:
        return {f.name: skipped(f.name, str(f.location), held) for f in flows}
    try:
        refresh_dataset(writers, dataset, writers.on_message)
    except FlowError as exc:
        return {f.name: FlowOutcome(f.name, str(f.location), "failed", exc.message) for f in flows}
    return {}


def run_outcomes(graph: PipelineGraph, finished: Mapping[str, FlowOutcome],
                 queries: Mapping[str, StreamingQuery], pending: Collection[str],
                 stopped: bool) -> list[FlowOutcome]:
    """The state each flow ended in, in definition order (``stopped``: the run was asked to stop)."""
    result = []
    for name, flow in graph.flows.items():
        location = str(flow.location)
        query = queries.get(name)
        if name in finished:
            result.append(finished[name])
        elif query is None:
            if graph.datasets[flow.target].runs and name in pending:
                result.append(FlowOutcome(name, location, "not started"))
        elif (error := query.exception()) is not None:
            result.append(FlowOutcome(name, location, "failed", first_line(error)))
        else:
            result.append(FlowOutcome(name, location, "stopped" if stopped else "completed"))
    return result


def run_failure(outcomes: list[FlowOutcome]) -> FlowError | None:
    """The error a run with failed flows raises, one line naming them and the flows they held back."""
    failed = [o for o in outcomes if o.state == "failed"]
    if not failed:
        return None
    names = "; ".join(f"'{o.flow}' ({o.location}): {o.error}" for o in failed)
    held = [f"'{o.flow}'" for o in outcomes if o.state == "skipped"]
    error = FlowError(f"{len(failed)} flow{'' if len(failed) == 1 else 's'} failed: {names}"
                      + (f"; skipped downstream: {', '.join(held)}" if held else ""))
    error.outcomes = tuple(outcomes)
    return error
