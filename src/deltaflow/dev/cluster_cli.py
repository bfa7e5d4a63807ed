"""``deltaflow cluster start|stop|status``: a Spark standalone cluster on loopback, from the command line."""

from __future__ import annotations

from typing import Annotated

import typer

from deltaflow.cli.shared import say
from deltaflow.dev.server_cli import JsonOption, answer_status

cluster_app = typer.Typer(help="Run a Spark standalone master and workers on loopback (tests, demo).",
                          no_args_is_help=True)

MasterPortOption = Annotated[int, typer.Option("--port", help="The master's port on 127.0.0.1 (its web UI: "
                                               "port + 1).")]


@cluster_app.command("start")
def cluster_start(port: MasterPortOption = 7077,
                  workers: Annotated[int, typer.Option("--workers", help="How many workers.")] = 2,
                  cores: Annotated[int, typer.Option("--cores", help="Cores per worker.")] = 1,
                  memory: Annotated[str, typer.Option("--memory", help="Memory per worker.")] = "2g") -> None:
    """Start a master and workers; returns once every worker has registered."""
    from deltaflow.dev.spark_cluster import LocalSparkCluster

    master = LocalSparkCluster(port, workers, cores, memory).start()
    say(f"cluster: {master} with {workers} worker(s) of {cores} core(s), {memory}; run a pipeline on it "
        f"with configuration: {{spark.master: {master}}}")


@cluster_app.command("stop")
def cluster_stop(port: MasterPortOption = 7077) -> None:
    """Stop the workers and the master."""
    from deltaflow.dev.spark_cluster import LocalSparkCluster

    say("cluster: stopped" if LocalSparkCluster(port).stop() else "cluster: was not running")


@cluster_app.command("status")
def cluster_status(port: MasterPortOption = 7077, as_json: JsonOption = False) -> None:
    """Say whether the master answers and how many workers are alive; exit 1 when it does not answer."""
    from deltaflow.dev.spark_cluster import LocalSparkCluster

    state = LocalSparkCluster(port).status()
    answer_status(state.running, {"master": state.master, "running": state.running, "workers": state.workers},
                  f"cluster: {state.master}, {state.workers} worker(s) alive" if state.running
                  else f"cluster: no master answers at {state.master}", as_json)
