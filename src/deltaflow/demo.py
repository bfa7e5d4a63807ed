"""``deltaflow demo``: the clickstream pipeline, live, on embedded defaults.

Starts (or reuses) the embedded Kafka broker, creates the ``clicks`` topic, produces realistic clickstream
events at a steady rate, and runs the ``examples/clickstream`` pipeline continuously with one live status
line, until ``--seconds`` pass or Ctrl-C; then says where the tables are and how to query them.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from rich.console import Console
from rich.live import Live

from deltaflow.errors import ConfigError
from deltaflow.kafka.admin import create_topic
from deltaflow.kafka.broker import EmbeddedKafka
from deltaflow.kafka.generator import EventGenerator
from deltaflow.loader import load_graph
from deltaflow.progress import ProgressPrinter
from deltaflow.runtime.runner import PipelineRun
from deltaflow.runtime.session import build_session
from deltaflow.runtime.triggers import Trigger
from deltaflow.spec import load_spec

TOPIC = "clicks"
EXAMPLES = Path(os.environ.get("DELTAFLOW_EXAMPLES", Path(__file__).resolve().parents[2] / "examples"))


def example_spec_path(name: str = "clickstream") -> Path:
    """The folder of a shipped example pipeline."""
    path = EXAMPLES / name
    if not (path / "deltaflow.yml").is_file():
        raise ConfigError(f"example '{name}' not found", location=str(path),
                          hint="run from a deltaflow checkout or set DELTAFLOW_EXAMPLES")
    return path


def run_demo(*, seconds: int, rate: int, storage: Path, port: int, stop: threading.Event,
             console: Console) -> None:
    """Run the demo; see the module docstring."""
    storage = storage.resolve()
    broker = EmbeddedKafka(port=port)
    started_broker = not broker.status().running
    console.print(f"kafka: {'starting' if started_broker else 'reusing'} the embedded broker on "
                  f"127.0.0.1:{port}...", markup=False)
    bootstrap = broker.start()
    generator: EventGenerator | None = None
    try:
        create_topic(bootstrap, TOPIC, partitions=3)
        os.environ["DELTAFLOW_STORAGE"] = str(storage)
        os.environ["DELTAFLOW_KAFKA"] = bootstrap
        spec = load_spec(example_spec_path())
        graph = load_graph(spec)
        generator = EventGenerator(bootstrap, TOPIC, rate=rate)
        generator.start()
        console.print(f"generator: {rate:,} clickstream events/s into topic '{TOPIC}'", markup=False)
        console.print("spark: starting (a few seconds)...", markup=False)
        spark = build_session(spec)
        printer = ProgressPrinter(console=console, live=True)
        run = PipelineRun(spec, graph, spark, Trigger("continuous", spec.trigger.interval), on_batch=printer)
        run.start()
        timer = threading.Timer(seconds, stop.set)
        timer.daemon = True
        timer.start()
        with Live(printer.status_line(), console=console, refresh_per_second=4, transient=False) as live:
            def refresh() -> None:
                while not stop.wait(0.25):
                    produced = f" | produced {generator.produced:,}" if generator else ""
                    live.update(printer.status_line(produced))

            painter = threading.Thread(target=refresh, daemon=True)
            painter.start()
            outcomes = run.wait(stop)
            painter.join()
        timer.cancel()
        for outcome in outcomes:
            if outcome.state == "failed":
                console.print(f"{outcome.flow} failed: {outcome.error}", markup=False)
        _summary(spec.storage_path, list(graph.datasets), console)
    finally:
        if generator is not None:
            generator.stop()
        if started_broker:
            broker.stop()


def _summary(storage: str, datasets: list[str], console: Console) -> None:
    from deltalake import DeltaTable

    console.print("")
    for name in datasets:
        path = f"{storage}/tables/{name}"
        rows = DeltaTable(path).to_pyarrow_dataset().count_rows()
        console.print(f"{name}: {rows:,} rows in {path}", markup=False, soft_wrap=True)
    first = f"{storage}/tables/{datasets[0]}"
    console.print("\nQuery it with Spark:\n"
                  f"  spark.read.format('delta').load('{first}').show()\n"
                  "or without a JVM:\n"
                  f"  python -c \"from deltalake import DeltaTable; "
                  f"print(DeltaTable('{first}').to_pandas().tail())\"", markup=False, soft_wrap=True)
