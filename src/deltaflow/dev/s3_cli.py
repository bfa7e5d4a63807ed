"""``deltaflow s3 start|stop|status``: the local S3-compatible server (moto), from the command line."""

from __future__ import annotations

from typing import Annotated

import typer

from deltaflow.cli.shared import say
from deltaflow.dev.server_cli import JsonOption, answer_status

s3_app = typer.Typer(help="Run a local S3-compatible server on loopback (development, tests, demo).",
                     no_args_is_help=True)

S3PortOption = Annotated[int, typer.Option("--port", help="Server port on 127.0.0.1.")]
BucketOption = Annotated[list[str] | None, typer.Option("--bucket", help="A bucket to create (repeatable; "
                                                        "default: lake).")]


@s3_app.command("start")
def s3_start(port: S3PortOption = 19000, bucket: BucketOption = None) -> None:
    """Start the server (objects kept in memory) and create the buckets; returns once it answers."""
    from deltaflow.dev.s3_server import ACCESS_KEY, SECRET_KEY, LocalS3

    endpoint = LocalS3(port).start(bucket or ["lake"])
    say(f"s3: running at {endpoint}, buckets {', '.join(bucket or ['lake'])} "
        f"(any keys work; the demo's: {ACCESS_KEY} / {SECRET_KEY})")


@s3_app.command("stop")
def s3_stop(port: S3PortOption = 19000) -> None:
    """Stop the server (its objects are gone)."""
    from deltaflow.dev.s3_server import LocalS3

    say("s3: stopped" if LocalS3(port).stop() else "s3: was not running")


@s3_app.command("status")
def s3_status(port: S3PortOption = 19000, as_json: JsonOption = False) -> None:
    """Say whether the server runs; exit 1 when it does not."""
    from deltaflow.dev.s3_server import LocalS3

    state = LocalS3(port).status()
    line = f"s3: running at {state.endpoint} (pid {state.pid})" if state.running else "s3: not running"
    answer_status(state.running, {"running": state.running, "endpoint": state.endpoint, "pid": state.pid,
                                  "log_file": str(state.log_file)}, line, as_json)
