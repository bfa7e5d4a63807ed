"""``deltaflow kafka start|stop|status``: the embedded Apache Kafka broker, from the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from deltaflow.cli.shared import say
from deltaflow.dev.server_cli import JsonOption, answer_status

kafka_app = typer.Typer(help="Run an embedded Apache Kafka broker on loopback (development, tests, demo).",
                        no_args_is_help=True)

PortOption = Annotated[int, typer.Option("--port", help="Broker port on 127.0.0.1.")]
StateOption = Annotated[Path | None, typer.Option("--state-dir", help="Broker data and logs "
                                                  "(default: $DELTAFLOW_HOME/kafka).")]


@kafka_app.command("start")
def kafka_start(port: PortOption = 19092, state_dir: StateOption = None) -> None:
    """Start the broker (KRaft, single node, 127.0.0.1); returns once a topic can be created."""
    from deltaflow.dev.broker import EmbeddedKafka

    broker = EmbeddedKafka(state_dir=state_dir, port=port)
    bootstrap = broker.start()
    say(f"kafka: running at {bootstrap} (data and logs in {broker.status().state_dir})")


@kafka_app.command("stop")
def kafka_stop(port: PortOption = 19092, state_dir: StateOption = None) -> None:
    """Stop the broker cleanly."""
    from deltaflow.dev.broker import EmbeddedKafka

    was_running = EmbeddedKafka(state_dir=state_dir, port=port).stop()
    say("kafka: stopped" if was_running else "kafka: was not running")


@kafka_app.command("status")
def kafka_status(port: PortOption = 19092, state_dir: StateOption = None,
                 as_json: JsonOption = False) -> None:
    """Say whether the broker runs, where, and where its log is; exit 1 when it is not running."""
    from deltaflow.dev.broker import EmbeddedKafka

    state = EmbeddedKafka(state_dir=state_dir, port=port).status()
    line = (f"kafka: running at {state.bootstrap} (pid {state.pid}, log {state.log_file})" if state.running
            else f"kafka: not running (state in {state.state_dir})")
    answer_status(state.running, {"running": state.running, "bootstrap": state.bootstrap, "pid": state.pid,
                                  "log_file": str(state.log_file), "state_dir": str(state.state_dir)},
                  line, as_json)
