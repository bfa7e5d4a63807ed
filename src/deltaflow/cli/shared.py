"""What every ``deltaflow`` verb shares: the consoles, ``--spec`` and ``--json``, loading the pipeline."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from deltaflow.errors import ArgumentError, DeltaflowError, InternalError, first_line

try:  # typer 0.2x carries its own copy of click
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover - older typer, over click itself
    from click import exceptions as click_errors  # type: ignore[no-redef]

if TYPE_CHECKING:
    from deltaflow.pipeline import Pipeline
    from deltaflow.ui.app import UiServer

#: The width of output to a pipe or a file: no line is wrapped (a table is as wide as its cells).
UNWRAPPED = 1_000_000


def console(stderr: bool = False) -> Console:
    """A console for deltaflow's lines: wrapped to a terminal's width, never when piped or redirected."""
    terminal = Console(stderr=stderr).is_terminal
    return Console(stderr=stderr, highlight=False, soft_wrap=True, width=None if terminal else UNWRAPPED)


out = console()
err = console(stderr=True)

SpecOption = Annotated[Path | None, typer.Option("--spec", help="deltaflow.yml (or an SDP "
                                                 "spark-pipeline.yml), or a folder holding one (default: the "
                                                 "nearest one from the current folder up).")]
JsonOption = Annotated[bool, typer.Option("--json", help="JSON instead of a table.")]
UiPortOption = Annotated[int | None, typer.Option("--port", help="The dashboard's port (default 8787; 0: any "
                                                  "free one).", min=0, max=65535)]


def say(text: str, console: Console = out) -> None:
    """Print ``text`` as it is (no markup, no wrapping)."""
    console.print(text, markup=False, soft_wrap=True, highlight=False)


def exit_code(command: Callable[[], Any]) -> int:
    """Run ``command`` (the app, not standalone); its exit code, having printed its error as one line.

    0 done; 1 the pipeline or its input is wrong, or a flow failed; 2 the command line is wrong (click's
    usage errors and :class:`~deltaflow.errors.ArgumentError`, told before Spark starts); 130 interrupted.

    Examples:
        >>> exit_code(lambda: app(args=["rewind", "t"], standalone_mode=False))  # doctest: +SKIP
        error: DF-USAGE rewind: give the version (--to-version) or the time (--to-timestamp) to rewind to
        2

    """
    try:
        code = command()
    except getattr(click_errors, "NoArgsIsHelpError", ()) as exc:  # 'deltaflow' alone: the help
        say(exc.ctx.get_help() if exc.ctx else str(exc), err)
        return 2
    except click_errors.UsageError as exc:  # one line, not click's usage box
        verb = exc.ctx.command_path if exc.ctx else "deltaflow"
        say(f"error: {verb}: {exc.format_message().rstrip('.')} (see '{verb} --help')", err)
        return 2
    except click_errors.ClickException as exc:
        say(f"error: {exc.format_message()}", err)
        return exc.exit_code
    except SystemExit as exc:
        if isinstance(exc.code, str):
            say(exc.code, err)
            return 1
        return exc.code or 0
    except ArgumentError as exc:
        say(f"error: {exc}", err)
        return 2
    except DeltaflowError as exc:
        say(f"error: {exc}", err)
        return 1
    except (KeyboardInterrupt, typer.Abort):
        say("interrupted", err)
        return 130
    except Exception as exc:  # not ours (a verb without a run log): one line all the same
        say(f"error: {InternalError(f'{type(exc).__name__}: {first_line(exc)}')}", err)
        return 1
    return code if isinstance(code, int) else 0


def load(spec: Path | None, reading: bool = False) -> Pipeline:
    """The pipeline of ``--spec`` (default: the nearest ``deltaflow.yml`` upward).

    ``reading``: the verb only reads the storage; it needs no secret but the storage's.
    """
    from deltaflow.pipeline import Pipeline

    return Pipeline.load(spec, reading=reading)


def start_ui(pipeline: Pipeline, host: str = "127.0.0.1", port: int | None = None,
             console: Console = err) -> UiServer:
    """Start ``pipeline``'s dashboard, print its address (and a warning when it is not on loopback)."""
    import ipaddress

    server = pipeline.serve_ui(host, port)
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        say(f"warning: the dashboard listens on {host}: anyone who can reach it sees the pipeline's state "
            "(read-only, no secrets)", console)
    say(f"dashboard: {server.url}  (metrics: {server.url}metrics)", console)
    return server
