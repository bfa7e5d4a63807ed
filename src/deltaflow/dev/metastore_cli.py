"""``deltaflow metastore start|stop|status``: a Hive Metastore service on loopback, from the command line."""

from __future__ import annotations

from typing import Annotated

import typer

from deltaflow.cli.shared import say
from deltaflow.dev.server_cli import JsonOption, answer_status

metastore_app = typer.Typer(help="Run a Hive Metastore service on loopback: the pipelines' tables by name.",
                            no_args_is_help=True)

MetastorePortOption = Annotated[int, typer.Option("--port", help="Its Thrift port on 127.0.0.1.")]


@metastore_app.command("start")
def metastore_start(port: MetastorePortOption = 9083) -> None:
    """Start the service (its state in $DELTAFLOW_HOME/metastore/PORT); returns once it answers."""
    from deltaflow.dev.metastore import LocalMetastore

    metastore = LocalMetastore(port)
    uri = metastore.start()
    say(f"metastore: {uri} (state in {metastore.state_dir}); a pipeline registers its tables there with "
        f"metastore: {{uri: {uri}}}")


@metastore_app.command("stop")
def metastore_stop(port: MetastorePortOption = 9083) -> None:
    """Stop the service (its state is kept for the next start)."""
    from deltaflow.dev.metastore import LocalMetastore

    say("metastore: stopped" if LocalMetastore(port).stop() else "metastore: was not running")


@metastore_app.command("status")
def metastore_status(port: MetastorePortOption = 9083, as_json: JsonOption = False) -> None:
    """Say whether the service answers; exit 1 when it does not."""
    from deltaflow.dev.metastore import LocalMetastore

    state = LocalMetastore(port).status()
    answer_status(state.running, {"uri": state.uri, "running": state.running, "pid": state.pid},
                  f"metastore: {state.uri} answers" if state.running
                  else f"metastore: nothing answers at {state.uri}", as_json)
