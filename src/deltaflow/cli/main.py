"""The ``deltaflow`` command: one thin function per verb, each over :class:`deltaflow.pipeline.Pipeline`.

    deltaflow init [DIR] [--example NAME] [--force]    a new project: spec, starter definitions, sample input
    deltaflow schema                 the JSON Schema of deltaflow.yml
    deltaflow setup                  resolve the JVM jars (Delta, Kafka connector, Kafka broker) once
    deltaflow dry-run [--json]       resolve and analyse the pipeline, write nothing
    deltaflow plan [--json]          what changed since the last run, what the next run rebuilds
    deltaflow graph [--format text|json|mermaid|dot]
    deltaflow run [--available-now | --continuous | --once] [--refresh a,b] [--full-refresh a]
    deltaflow status [--json]        each flow's state, last batch, rates and backlog, without Spark
    deltaflow ui [--port 8787] [--host 127.0.0.1]    the live dashboard and /metrics, without Spark
    deltaflow show TABLE [--limit 20] [--where SQL] [--version V] [--json|--csv]    rows, without Spark
    deltaflow sql "SELECT ..." [--json|--csv]    a query over the pipeline's tables by name, without Spark
    deltaflow changes TABLE [--from V] [--to V] [--json]    a table's Change Data Feed, without Spark
    deltaflow history TABLE [--limit N] [--json]    a table's versions and the flow batch behind each
    deltaflow optimize [TABLE ...] [--zorder a,b] [--where SQL]    compact small files, while running
    deltaflow vacuum [TABLE ...] [--retain 7d] [--dry-run]    delete old files no flow still reads
    deltaflow quarantine TABLE [--json]    quarantined rows by reason, with samples, without Spark
    deltaflow quarantine replay TABLE [--where SQL]    re-feed them once the schema or rule is fixed
    deltaflow demo [--example clickstream|orders|fraud|customers_cdc|sensors] [--seconds 60] [--rate 1000]
    deltaflow kafka start|stop|status [--port 19092]
    deltaflow s3 start|stop|status [--port 19000] [--bucket lake]
    deltaflow cluster start|stop|status [--port 7077] [--workers 2]
    deltaflow metastore start|stop|status [--port 9083]

Every verb that reads a pipeline takes ``--spec`` (default: the nearest ``deltaflow.yml`` upward).
``-v/--verbose`` shows Spark's own log (``$DELTAFLOW_LOG_LEVEL`` sets its level; default: errors only).

Exit codes: 0 done; 1 the pipeline or its input is wrong (one line: ``error: DF-CONFIG deltaflow.yml:
unknown key 'kafak' ...``), or a flow failed; 2 the command line is wrong (one line, told before Spark
starts: a usage error, or ``DF-USAGE`` for an argument that does not fit the pipeline); 130 interrupted.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from deltaflow.cli.analyse import ANALYSE_VERBS
from deltaflow.cli.plan import PLAN_VERBS
from deltaflow.cli.progress import plural
from deltaflow.cli.project import PROJECT_VERBS
from deltaflow.cli.shared import (
    SpecOption,
    UiPortOption,
    err,
    exit_code,
    load,
    out,
    say,
    start_ui,
)
from deltaflow.cli.tables import TABLE_VERBS
from deltaflow.dev.cluster_cli import cluster_app
from deltaflow.dev.kafka_cli import PortOption, kafka_app
from deltaflow.dev.metastore_cli import metastore_app
from deltaflow.dev.s3_cli import s3_app
from deltaflow.errors import DeltaflowError, FlowError
from deltaflow.runtime.run_log import append_trace, run_log

if TYPE_CHECKING:
    from deltaflow.runtime.outcomes import FlowOutcome
    from deltaflow.spec import TriggerMode

app = typer.Typer(
    help="Declarative streaming pipelines on PySpark + Delta Lake, exactly once.",
    no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False,
)
app.add_typer(kafka_app, name="kafka")
app.add_typer(s3_app, name="s3")
app.add_typer(cluster_app, name="cluster")
app.add_typer(metastore_app, name="metastore")
for verb in (*PROJECT_VERBS, *ANALYSE_VERBS, *PLAN_VERBS, *TABLE_VERBS):
    app.command()(verb)

def _version(value: bool) -> None:
    if value:
        from deltaflow import __version__

        say(f"deltaflow {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show Spark's own log (INFO).")] = False,
) -> None:
    if verbose:
        os.environ["DELTAFLOW_LOG_LEVEL"] = "INFO"


#: Signals this close to the first are the same stop: ``timeout`` and ``kill -- -PGID`` send the signal to
#: the process and to its group, and a supervisor may signal both the process and its group.
SAME_STOP_SECONDS = 1.0


@contextmanager
def stop_on_signals(at_once: bool = False) -> Iterator[threading.Event]:
    """An event set by the first Ctrl-C or SIGTERM; another one, a second or more later, interrupts at once.

    ``at_once``: that one ends the process there and then (:func:`_end_now`) instead of unwinding
    through a run whose JVM would print a stack trace for every query it stops.
    """
    stop = threading.Event()
    first: float | None = None

    def handler(signum: int, frame: FrameType | None) -> None:
        nonlocal first
        now, name = time.monotonic(), signal.Signals(signum).name
        if first is None:
            # Claimed before any call: a signal that lands inside say() or set() runs this handler
            # again, and must find the stop already taken (``timeout`` sends two within microseconds).
            first = now
            stop.set()
            say(f"\n{name}: stopping after the current batch (again to stop now)...", err)
            return
        if now - first < SAME_STOP_SECONDS:
            return
        if at_once:
            _end_now(name)
        raise KeyboardInterrupt

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _end_now(signal_name: str) -> NoReturn:
    """End a run at once (exit 130), as a crash would: the next run writes the batches in flight again."""
    from deltaflow.runtime.session import kill_driver_jvm

    say(f"{signal_name} again: stopped at once; the next run writes the batches in flight again, each once",
        err)
    sys.stdout.flush()
    sys.stderr.flush()
    quiet = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):  # the run's other threads, cut off from the JVM, would each log a py4j traceback
        os.dup2(quiet, fd)
    kill_driver_jvm()
    os._exit(130)


@app.command()
def setup(force: Annotated[bool, typer.Option(help="Resolve and build again even if cached.")] = False,
          ) -> None:
    """Resolve the JVM jars from Maven Central into the local cache, and build the driver's class archive.

    Nothing is downloaded at run time; the archive makes every later Spark start about 10 s faster.
    """
    from deltaflow.runtime.class_archive import build_archive
    from deltaflow.runtime.jars import resolve_jars

    resolve_jars(force=force, log=lambda line: say(line, err))
    build_archive(force=force, log=lambda line: say(line, err))


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
    refresh: Annotated[str | None, typer.Option(help="Only these datasets (comma-separated); the others "
                                                "are left as they are.")] = None,
    full_refresh: Annotated[str | None, typer.Option(help="Rebuild these datasets (comma-separated) and "
                                                     "everything downstream from scratch.")] = None,
    full_refresh_all: Annotated[bool, typer.Option("--full-refresh-all", help="Rebuild every dataset from "
                                                   "scratch.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No per-batch lines.")] = False,
    ui: Annotated[bool, typer.Option("--ui", help="Serve the live dashboard beside the run (see "
                                     "'deltaflow ui').")] = False,
    ui_port: UiPortOption = None,
) -> None:
    """Run the pipeline's flows (default trigger: the spec's, else --available-now)."""
    from deltaflow.cli.progress import ProgressPrinter, format_outcome
    from deltaflow.runtime.run_plan import RunPlan

    flags: list[tuple[TriggerMode, bool]] = [("available_now", available_now), ("continuous", continuous),
                                             ("once", once)]
    modes = [mode for mode, on in flags if on]
    if len(modes) > 1:
        raise typer.BadParameter("choose one of --available-now, --continuous, --once")
    mode = modes[0] if modes else None
    if interval is not None and mode in ("available_now", "once"):
        raise typer.BadParameter(f"--interval is for continuous flows, not --{mode.replace('_', '-')}",
                                 param_hint="--interval")
    pipeline = load(spec)
    plan = RunPlan(refresh=_names(refresh) or None, full_refresh=_names(full_refresh),
                   full_refresh_all=full_refresh_all)
    plan.check(pipeline.graph)  # the command line's names and interval, before anything else
    pipeline.trigger(mode, interval)
    pipeline.storage()  # a wrong endpoint or bucket: one line, before anything starts
    say(f"deltaflow: pipeline '{pipeline.name}', {plural(len(pipeline.graph.flows), 'flow')}, "
         f"{pipeline.trigger(mode, interval).describe()}, storage {pipeline.layout.root}", err)
    for note in pipeline.graph.notes:
        say(f"note: {note}", err)
    printer = ProgressPrinter(console=err, quiet=quiet)
    server = start_ui(pipeline, port=ui_port) if ui else None
    outcomes: Sequence[FlowOutcome] = ()
    try:
        with run_log(pipeline.layout, pipeline.name) as log, stop_on_signals(at_once=True) as stop:
            try:
                outcomes = pipeline.run(mode, interval, stop=stop, plan=plan, on_batch=printer,
                                        on_message=lambda m: say(m, err))
            except Exception as exc:
                if not stop.is_set() or isinstance(exc, DeltaflowError):
                    raise
                # a signal to the whole process group (Ctrl-C, a service's stop) ends Spark's JVM as well
                append_trace(log, exc)
                say("stopped while starting: Spark was stopped by the same signal; the next run starts "
                    "where the last one ended", err)
                raise KeyboardInterrupt from None
    except FlowError as exc:  # how each flow ended (the skipped ones too), then the error's line
        outcomes = exc.outcomes
        raise
    finally:
        if server is not None:
            server.stop()
        for outcome in outcomes:
            say(format_outcome(outcome, printer.totals.get(outcome.flow)), err)


@app.command()
def status(spec: SpecOption = None, as_json: Annotated[bool, typer.Option(
        "--json", help="One JSON object per flow.")] = False) -> None:
    """Each flow's state, last batch, rows/s in vs processed and backlog, from the event log (no Spark)."""
    from deltaflow.cli.views import status_notes, status_table

    pipeline = load(spec, reading=True)
    flows = pipeline.status()
    if as_json:
        for flow in flows:
            say(json.dumps(flow.as_json()))
        return
    out.print(status_table(flows))
    for flow in flows:
        if note := status_notes(flow):
            say(f"{flow.flow}: {note}")  # as it is: Spark's errors have [BRACKETS] rich would take as markup
    if why := pipeline.spec.unset_under("kafka"):
        say(f"Kafka backlogs are the ones at each flow's last batch: {why}")


@app.command()
def ui(spec: SpecOption = None, port: UiPortOption = None, host: Annotated[str, typer.Option(
        help="The address to listen on; anything but loopback makes the page reachable from the network."
        )] = "127.0.0.1") -> None:
    """Serve the pipeline's live dashboard and Prometheus /metrics, from its storage (no Spark).

    Read-only: it works for a pipeline that is running, stopped, or running on another machine.
    """
    server = start_ui(load(spec, reading=True), host, port)
    say("Ctrl-C to stop", err)
    with stop_on_signals() as stop:
        stop.wait()
    server.stop()


@app.command()
def quarantine(
    table: Annotated[str, typer.Argument(help="A streaming table with quarantine rules or dp.parse_json; "
                                         "'replay TABLE' re-feeds its rows.", metavar="[replay] TABLE")],
    replay_table: Annotated[str | None, typer.Argument(hidden=True)] = None,
    sample: Annotated[int, typer.Option(help="Sample rows shown per reason.", min=0)] = 3,
    where: Annotated[str | None, typer.Option(help="replay: only the quarantined rows matching this SQL "
                                              "condition, e.g. \"array_contains(failed_expectations, "
                                              "'small')\".")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Counts and samples (replay: the result) as one "
                                          "JSON object.")] = False,
    spec: SpecOption = None,
) -> None:
    """Show a table's quarantined rows by reason, with samples ('quarantine replay TABLE' re-feeds them).

    Replay them once the schema or the rule is fixed: they go through the flow's current definition.
    """
    from deltaflow.cli.views import quarantine_tables
    from deltaflow.commands.changes import json_line

    if replay_table is None and where is not None:
        raise typer.BadParameter("--where is for 'deltaflow quarantine replay TABLE'", param_hint="--where")
    if replay_table is not None:
        if table != "replay":
            raise typer.BadParameter(f"unexpected argument '{replay_table}'",
                                     param_hint="deltaflow quarantine [replay] TABLE")
        pipeline = load(spec)
        with run_log(pipeline.layout, pipeline.name):
            result = pipeline.replay_quarantine(replay_table, where)
        if as_json:
            say(json.dumps({"table": replay_table, "replayed": result.replayed, "passed": result.passed,
                             "resumed": result.resumed}))
            return
        finished = "finished the interrupted replay: " if result.resumed else ""
        refed = plural(result.replayed, "quarantined row")
        again = result.replayed - result.passed
        say(f"{replay_table}: {finished}{refed} re-fed, {result.passed:,} passed into the table, {again:,} "
            "quarantined again")
        return
    pipeline = load(spec, reading=True)
    if table == "replay" and "replay" not in pipeline.storage().quarantined_tables():
        raise typer.BadParameter("'replay' takes the table to replay: deltaflow quarantine replay TABLE",
                                 param_hint="TABLE")
    report = pipeline.quarantine(table, sample)
    if as_json:
        say(json_line({"table": report.table, "rows": report.rows, "reasons": report.reasons,
                        "samples": report.samples}))
        return
    if not report.rows:
        say(f"{table}: its quarantine is still empty (no row has failed its rules)")
        return
    for view in quarantine_tables(report):
        out.print(view)


@app.command()
def demo(
    example: Annotated[str, typer.Option("--example", "-e", help="The example pipeline: clickstream, orders, "
                                         "fraud, customers_cdc or sensors.")] = "clickstream",
    seconds: Annotated[int, typer.Option(help="How long to run (Ctrl-C stops earlier).")] = 60,
    rate: Annotated[int, typer.Option(help="Generated events (orders: orders per file) per second.")] = 1000,
    storage: Annotated[Path, typer.Option(help="Where the demo's tables, checkpoints and landing folders "
                                          "go.")] = Path("deltaflow_demo"),
    port: PortOption = 19092,
    ui: Annotated[bool, typer.Option("--ui/--no-ui", help="Serve the live dashboard beside the run.")] = True,
) -> None:
    """Run an example pipeline live on generated data (a local Kafka broker when it needs one)."""
    from deltaflow.dev.demo import run_demo

    with stop_on_signals() as stop:
        run_demo(example=example, seconds=seconds, rate=rate, storage=storage, port=port, stop=stop,
                 console=err, ui=ui)


def invoke(args: Sequence[str] | None = None) -> int:
    """Run the command line ``args`` (default: ``sys.argv[1:]``) in this process; return its exit code.

    Examples:
        >>> invoke(["--version"])  # doctest: +SKIP
        deltaflow 0.1.0
        0

    """
    from deltaflow.cli.help import tidy

    command = tidy(typer.main.get_command(app))
    return exit_code(lambda: command.main(args=list(args) if args is not None else None,
                                          prog_name="deltaflow", standalone_mode=False))


def main() -> None:
    """Entry point of the ``deltaflow`` console script."""
    code = invoke()
    if "deltalake" in sys.modules and "pyspark" not in sys.modules:
        # deltalake's native threads can abort the interpreter's teardown (SIGABRT, "terminate called
        # without an active exception", delta-rs#2184) after the command has finished; a command that
        # read with deltalake and started no JVM has nothing left to clean up, so leave at once.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
