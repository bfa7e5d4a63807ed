"""The ``deltaflow`` command: one function per verb.

    deltaflow setup                  resolve the JVM jars (Delta, Kafka connector, Kafka broker) once
    deltaflow dry-run [--spec PATH]  resolve and analyse the pipeline, write nothing
    deltaflow graph [--format text|mermaid|dot]
    deltaflow run [--available-now | --continuous | --once] [--refresh a,b] [--full-refresh a]
    deltaflow changes TABLE [--from V] [--to V] [--json]    a table's Change Data Feed, without Spark
    deltaflow status [--json]        each flow's state, last batch, rates and backlog, without Spark
    deltaflow quarantine TABLE [--json]    quarantined rows by reason, with samples, without Spark
    deltaflow quarantine replay TABLE [--where SQL]    re-feed them once the schema or rule is fixed
    deltaflow demo [--example clickstream|orders|fraud|customers_cdc] [--seconds 60] [--rate 1000]
    deltaflow kafka start|stop|status [--port 19092]

Errors print one line (``error: DF-CONFIG deltaflow.yml: unknown key 'kafak' ...``) and exit 1.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from deltaflow.errors import ConfigError, DeltaflowError

if TYPE_CHECKING:
    from deltaflow.resolve import Resolver

app = typer.Typer(
    help="Declarative streaming pipelines on PySpark + Delta Lake, exactly once.",
    no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False,
)
kafka_app = typer.Typer(help="Run an embedded Apache Kafka broker on loopback (development, tests, demo).",
                        no_args_is_help=True)
app.add_typer(kafka_app, name="kafka")
out = Console(highlight=False)
err = Console(stderr=True, highlight=False)

SpecOption = Annotated[Path | None, typer.Option("--spec", help="deltaflow.yml, or a folder holding one "
                                                 "(default: the nearest one from the current folder up).")]
PortOption = Annotated[int, typer.Option("--port", help="Broker port on 127.0.0.1.")]
StateOption = Annotated[Path | None, typer.Option("--state-dir", help="Broker data and logs "
                                                  "(default: $DELTAFLOW_HOME/kafka).")]


@contextmanager
def stop_on_signals() -> Iterator[threading.Event]:
    """An event set by the first Ctrl-C or SIGTERM; a second one interrupts at once."""
    stop = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        err.print(f"\n{signal.Signals(signum).name}: stopping after the current batch "
                  "(again to stop now)...", markup=False)
        stop.set()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


@app.command()
def setup(force: Annotated[bool, typer.Option(help="Resolve again even if cached.")] = False) -> None:
    """Resolve the JVM jars from Maven Central into the local cache (nothing is downloaded at run time)."""
    from deltaflow.runtime.jars import resolve_jars

    resolve_jars(force=force, log=lambda line: err.print(line, markup=False))


def _names(value: str | None) -> frozenset[str]:
    return frozenset(n.strip() for n in (value or "").split(",") if n.strip())


@app.command()
def run(
    spec: SpecOption = None,
    available_now: Annotated[bool, typer.Option("--available-now", help="Process everything available, "
                                                "then exit.")] = False,
    continuous: Annotated[bool, typer.Option("--continuous", help="Run until stopped (Ctrl-C / SIGTERM), "
                                             "a batch every trigger interval.")] = False,
    once: Annotated[bool, typer.Option("--once", help="Run one batch per flow, then exit.")] = False,
    interval: Annotated[str | None, typer.Option(help="Trigger interval for --continuous, e.g. "
                                                 "'10 seconds' (default: the spec's).")] = None,
    refresh: Annotated[str | None, typer.Option(help="Only these datasets (comma-separated) and the "
                                                "datasets they read.")] = None,
    full_refresh: Annotated[str | None, typer.Option(help="Rebuild these datasets (comma-separated) and "
                                                     "everything downstream from scratch.")] = None,
    full_refresh_all: Annotated[bool, typer.Option("--full-refresh-all", help="Rebuild every dataset from "
                                                   "scratch.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No per-batch lines.")] = False,
) -> None:
    """Run the pipeline's flows (default trigger: the spec's, else --available-now)."""
    from deltaflow.loader import load_graph
    from deltaflow.progress import ProgressPrinter
    from deltaflow.runtime.runner import PipelineRun, RunPlan
    from deltaflow.runtime.session import build_session
    from deltaflow.runtime.triggers import Trigger, flow_triggers
    from deltaflow.spec import TriggerMode, load_spec

    flags: list[tuple[TriggerMode, bool]] = [("available_now", available_now), ("continuous", continuous),
                                             ("once", once)]
    modes = [mode for mode, on in flags if on]
    if len(modes) > 1:
        raise ConfigError("choose one of --available-now, --continuous, --once")
    pipeline = load_spec(spec)
    trigger = Trigger(modes[0] if modes else pipeline.trigger.mode, interval or pipeline.trigger.interval)
    graph = load_graph(pipeline, start_spark=lambda: build_session(pipeline))
    plan = RunPlan(refresh=_names(refresh) or None, full_refresh=_names(full_refresh),
                   full_refresh_all=full_refresh_all)
    plan.check(graph)
    triggers = flow_triggers(pipeline, graph.flows, trigger, mode_given=bool(modes))
    err.print(f"deltaflow: pipeline '{pipeline.name}', {len(graph.flows)} flow(s), {trigger.describe()}, "
              f"storage {pipeline.storage_path}", markup=False)
    with stop_on_signals() as stop:
        spark = build_session(pipeline)
        printer = ProgressPrinter(console=err, quiet=quiet)
        outcomes = PipelineRun(pipeline, graph, spark, trigger, on_batch=printer, plan=plan,
                               flow_triggers=triggers,
                               on_message=lambda m: err.print(m, markup=False)).run(stop)
    for outcome in outcomes:
        totals = printer.totals.get(outcome.flow)
        rows = totals.rows if totals else 0
        err.print(f"{outcome.flow}: {outcome.state}, {rows:,} rows this run", markup=False)


def _analyse(spec: Path | None) -> Resolver:
    """Load and resolve the pipeline without writing anything (Spark's scratch space goes to a temp dir)."""
    import tempfile

    from deltaflow.context import PipelineContext
    from deltaflow.loader import load_graph
    from deltaflow.resolve import Resolver
    from deltaflow.runtime.session import build_session
    from deltaflow.runtime.triggers import Trigger, flow_triggers
    from deltaflow.spec import load_spec

    pipeline = load_spec(spec)
    scratch = tempfile.mkdtemp(prefix="deltaflow-analyse-")
    extra = {"spark.sql.warehouse.dir": scratch, "spark.local.dir": scratch}
    graph = load_graph(pipeline, start_spark=lambda: build_session(pipeline, extra=extra))
    flow_triggers(pipeline, graph.flows, Trigger(pipeline.trigger.mode), mode_given=False)
    spark = build_session(pipeline, extra=extra)
    return Resolver(graph, PipelineContext(spark=spark, spec=pipeline), analyze_only=True).resolve()


@app.command("dry-run")
def dry_run(spec: SpecOption = None) -> None:
    """Resolve and analyse the whole pipeline without writing a byte; exit 1 on the first problem."""
    from deltaflow.render import text

    resolver = _analyse(spec)
    out.print(text(resolver), markup=False, soft_wrap=True)
    stored = sum(1 for d in resolver.graph.datasets.values() if d.stored)
    out.print(f"\ndry-run: ok, {len(resolver.graph.datasets)} dataset(s) ({stored} stored), "
              f"{len(resolver.graph.flows)} flow(s) analysed; nothing was written", markup=False)


@app.command()
def graph(
    spec: SpecOption = None,
    format: Annotated[str, typer.Option("--format", "-f", help="text, mermaid or dot.")] = "text",
) -> None:
    """Print the dataset graph: what each dataset reads, as text, Mermaid or Graphviz DOT."""
    from deltaflow.render import FORMATS

    if format not in FORMATS:
        raise ConfigError(f"unknown format '{format}'", location="--format", hint="text, mermaid or dot")
    out.print(FORMATS[format](_analyse(spec)), markup=False, soft_wrap=True)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit} ago"
    return f"{seconds:.0f} s ago"


def _backlog(versions: int | None, offsets: int | None) -> str:
    parts = ([f"{offsets:,} Kafka offsets"] if offsets is not None else []) + (
        [f"{versions:,} Delta versions"] if versions is not None else [])
    return ", ".join(parts) or "-"


@app.command()
def status(
    spec: SpecOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per flow.")] = False,
) -> None:
    """Each flow's state, last batch, rows/s in vs processed and backlog, from the event log (no Spark)."""
    import json

    from rich.table import Table

    from deltaflow.ops.status import pipeline_status
    from deltaflow.spec import load_spec

    flows = pipeline_status(load_spec(spec))
    if as_json:
        for flow in flows:
            out.print(json.dumps(flow.as_json()), markup=False, soft_wrap=True, highlight=False)
        return
    view = Table("flow", "state", "last batch", "rows/s in", "rows/s processed", "backlog", "note",
                 title_justify="left")
    for flow in flows:
        rates = [f"{r:,.0f}" if r is not None else "-"
                 for r in (flow.input_rows_per_second, flow.processed_rows_per_second)]
        quality = ", ".join(f"{n:,} {what}" for n, what in ((flow.quarantined_rows, "quarantined"),
                                                              (flow.dropped_rows, "dropped")) if n)
        behind = "falling behind: input outruns processing" if flow.falling_behind else ""
        note = "; ".join(p for p in (behind, quality, flow.error or "") if p)
        batch = "-" if flow.last_batch is None else f"{flow.last_batch} ({_age(flow.age_seconds)})"
        view.add_row(flow.flow, flow.state, batch, *rates,
                     _backlog(flow.delta_versions_behind, flow.kafka_offsets_behind), note)
    out.print(view)


def _position(row: dict[str, object]) -> str:
    if row.get("topic") is not None:
        return f"{row['topic']}/{row['partition']}@{row['offset']}"
    return str(row.get("source_file") or "-")


@app.command()
def quarantine(
    table: Annotated[str, typer.Argument(help="A streaming table with quarantine rules or dp.parse_json; "
                                         "'replay TABLE' re-feeds its rows.", metavar="[replay] TABLE")],
    replay_table: Annotated[str | None, typer.Argument(hidden=True)] = None,
    sample: Annotated[int, typer.Option(help="Sample rows shown per reason.")] = 3,
    where: Annotated[str | None, typer.Option(help="replay: only the quarantined rows matching this SQL "
                                              "condition, e.g. \"array_contains(failed_expectations, "
                                              "'small')\".")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Counts and samples as one JSON object.")] = False,
    spec: SpecOption = None,
) -> None:
    """Show a table's quarantined rows by reason, with samples ('quarantine replay TABLE' re-feeds them).

    Replay them once the schema or the rule is fixed: they go through the flow's current definition.
    """
    from rich.table import Table

    from deltaflow.ops.changes import json_line
    from deltaflow.ops.quarantine import quarantine_report
    from deltaflow.spec import load_spec

    if replay_table is not None:
        if table != "replay":
            raise ConfigError(f"unexpected argument '{replay_table}'",
                              hint="deltaflow quarantine [replay] TABLE")
        _replay(spec, replay_table, where)
        return
    report = quarantine_report(load_spec(spec), table, sample)
    if as_json:
        out.print(json_line({"table": report.table, "rows": report.rows, "reasons": report.reasons,
                             "samples": report.samples}), markup=False, soft_wrap=True, highlight=False)
        return
    counts = Table("reason", "rows", title=f"{table}_quarantine: {report.rows:,} row(s)",
                   title_justify="left")
    for reason, count in report.reasons.items():
        counts.add_row(reason, f"{count:,}")
    out.print(counts)
    samples = Table("reason", "source", "batch", "record", title="samples", title_justify="left")
    for reason, rows in report.samples.items():
        for row in rows:
            samples.add_row(reason, _position(row), str(row["batch_id"]), str(row["record"])[:120])
    out.print(samples)


def _replay(spec: Path | None, table: str, where: str | None) -> None:
    from deltaflow.context import PipelineContext
    from deltaflow.loader import load_graph
    from deltaflow.ops.replay import replay_quarantine
    from deltaflow.resolve import Resolver
    from deltaflow.runtime.session import build_session
    from deltaflow.spec import load_spec

    pipeline = load_spec(spec)
    graph = load_graph(pipeline, start_spark=lambda: build_session(pipeline))
    resolver = Resolver(graph, PipelineContext(spark=build_session(pipeline), spec=pipeline)).resolve()
    result = replay_quarantine(resolver, table, where)
    finished = "finished the interrupted replay: " if result.resumed else ""
    out.print(f"{table}: {finished}{result.replayed:,} quarantined row(s) re-fed, {result.passed:,} passed "
              f"into the table, {result.replayed - result.passed:,} quarantined again", markup=False)


@app.command()
def changes(
    table: Annotated[str, typer.Argument(help="A table of the pipeline.")],
    start: Annotated[int, typer.Option("--from", help="First version to show.")] = 0,
    end: Annotated[int | None, typer.Option("--to", help="Last version to show (default: latest).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
    limit: Annotated[int, typer.Option(help="At most this many rows in the table view (0: all).")] = 50,
    spec: SpecOption = None,
) -> None:
    """Show a table's Change Data Feed: every inserted, updated and deleted row between two versions."""
    from rich.table import Table

    from deltaflow.ops.changes import json_line, table_changes
    from deltaflow.spec import load_spec

    rows = table_changes(load_spec(spec), table, start, end)
    if as_json:
        for row in rows:
            out.print(json_line(row), markup=False, soft_wrap=True, highlight=False)
        return
    if not rows:
        out.print(f"{table}: no changes from version {start} to {'the latest' if end is None else end}",
                  markup=False)
        return
    view = Table(*rows[0].keys(), title=f"{table}: {len(rows):,} change(s)", title_justify="left")
    shown = rows if limit <= 0 else rows[:limit]
    for row in shown:
        view.add_row(*("" if v is None else str(v) for v in row.values()))
    out.print(view)
    if len(shown) < len(rows):
        out.print(f"... {len(rows) - len(shown):,} more (--limit 0 shows all, --json for JSON lines)",
                  markup=False)


@app.command()
def demo(
    example: Annotated[str, typer.Option("--example", "-e", help="The example pipeline: clickstream, orders, "
                                         "fraud or customers_cdc.")] = "clickstream",
    seconds: Annotated[int, typer.Option(help="How long to run (Ctrl-C stops earlier).")] = 60,
    rate: Annotated[int, typer.Option(help="Generated events (orders: orders per file) per second.")] = 1000,
    storage: Annotated[Path, typer.Option(help="Where the demo's tables, checkpoints and landing folders "
                                          "go.")] = Path("deltaflow_demo"),
    port: PortOption = 19092,
) -> None:
    """Run an example pipeline live on generated data (a local Kafka broker when it needs one)."""
    from deltaflow.demo import run_demo

    with stop_on_signals() as stop:
        run_demo(example=example, seconds=seconds, rate=rate, storage=storage, port=port, stop=stop,
                 console=err)


@kafka_app.command("start")
def kafka_start(port: PortOption = 19092, state_dir: StateOption = None) -> None:
    """Start the broker (KRaft, single node, 127.0.0.1); returns once a topic can be created."""
    from deltaflow.kafka.broker import EmbeddedKafka

    broker = EmbeddedKafka(state_dir=state_dir, port=port)
    bootstrap = broker.start()
    out.print(f"kafka: running at {bootstrap} (data and logs in {broker.status().state_dir})", markup=False)


@kafka_app.command("stop")
def kafka_stop(port: PortOption = 19092, state_dir: StateOption = None) -> None:
    """Stop the broker cleanly."""
    from deltaflow.kafka.broker import EmbeddedKafka

    was_running = EmbeddedKafka(state_dir=state_dir, port=port).stop()
    out.print("kafka: stopped" if was_running else "kafka: was not running", markup=False)


@kafka_app.command("status")
def kafka_status(port: PortOption = 19092, state_dir: StateOption = None) -> None:
    """Say whether the broker runs, where, and where its log is; exit 1 when it is not running."""
    from deltaflow.kafka.broker import EmbeddedKafka

    status = EmbeddedKafka(state_dir=state_dir, port=port).status()
    if status.running:
        out.print(f"kafka: running at {status.bootstrap} (pid {status.pid}, log {status.log_file})",
                  markup=False)
    else:
        out.print(f"kafka: not running (state in {status.state_dir})", markup=False)
        raise typer.Exit(1)


def main() -> None:
    """Entry point of the ``deltaflow`` console script."""
    code: int | str | None = 0
    try:
        app()
    except SystemExit as exc:
        code = exc.code
    except DeltaflowError as exc:
        err.print(f"error: {exc}", markup=False, soft_wrap=True)
        code = 1
    except KeyboardInterrupt:
        err.print("interrupted", markup=False)
        code = 130
    if "deltalake" in sys.modules and "pyspark" not in sys.modules:
        # deltalake's native threads can abort the interpreter's teardown (SIGABRT, "terminate called
        # without an active exception", delta-rs#2184) after the command has finished; a command that
        # read with deltalake and started no JVM has nothing left to clean up, so leave at once.
        if isinstance(code, str):
            err.print(code, markup=False)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code if isinstance(code, int) else 1)
    sys.exit(code)
