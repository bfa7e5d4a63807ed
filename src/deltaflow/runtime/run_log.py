"""Each run's own log: everything its JVM prints, and the stack trace behind the one line the terminal shows.

A command that runs flows (``run``, ``rewind``, ``optimize``, a quarantine replay...) writes one file per
run: ``<storage>/_logs/<UTC time>-<pid>.log`` on local storage; for object storage, a file of this
machine under deltaflow's home (``$DELTAFLOW_HOME/logs/<pipeline>/<UTC time>-<pid>.log``), since a JVM
writes its output to a file descriptor. The newest :data:`KEEP` are kept. When the command fails, the
error's stack trace (Python's, with the JVM's inside it) is appended to the file and the error's line ends
with ``the full error is in <file>``; an error deltaflow did not expect becomes a one-line
:class:`~deltaflow.errors.InternalError` the same way, never a traceback on the terminal.

Examples:
    >>> with run_log(pipeline.layout, pipeline.name):  # doctest: +SKIP
    ...     pipeline.run("available_now")

"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from deltaflow.errors import ConfigError, DeltaflowError, InternalError, first_line
from deltaflow.runtime.jars import home

if TYPE_CHECKING:
    from deltaflow.storage import StorageLayout

#: How many run logs a pipeline keeps (the oldest go when a run starts).
KEEP = 20
#: Set while a command's run log is open: the file a JVM started then prints into.
LOG_VARIABLE = "DELTAFLOW_SPARK_LOG"


def log_folder(layout: StorageLayout, pipeline: str, outside: bool = False) -> Path:
    """The folder of ``pipeline``'s run logs (see the module docstring).

    ``outside``: in deltaflow's home, not the storage, for a verb that writes nothing there (``dry-run``).

    Examples:
        >>> from deltaflow.storage import StorageLayout
        >>> str(log_folder(StorageLayout("/data/pipe"), "shop"))
        '/data/pipe/_logs'

    """
    if layout.is_local and not outside:
        return Path(layout.run_logs)
    return home() / "logs" / re.sub(r"[^\w.-]+", "_", pipeline)


def new_log(layout: StorageLayout, pipeline: str, outside: bool = False) -> Path:
    """A new run's log file (not created yet), the folder's oldest logs beyond :data:`KEEP` removed."""
    folder = log_folder(layout, pipeline, outside)
    with contextlib.suppress(OSError):
        for old in sorted(folder.glob("*.log"))[:-(KEEP - 1)]:
            old.unlink()
    return folder / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}.log"


@contextmanager
def run_log(layout: StorageLayout, pipeline: str, outside: bool = False) -> Iterator[Path | None]:
    """A command's JVM prints into a new run log, and a failure's stack trace goes there too (one line out).

    Not with ``deltaflow -v`` (Spark's log on the terminal) or ``$DELTAFLOW_SPARK_LOG`` already set (then
    that file is the log). ``outside``: the log goes to deltaflow's home, not into the storage (see
    :func:`log_folder`). Yields the log's path (None when there is none).
    """
    if "DELTAFLOW_LOG_LEVEL" in os.environ:
        yield None
        return
    own = LOG_VARIABLE not in os.environ
    path = new_log(layout, pipeline, outside) if own else Path(os.environ[LOG_VARIABLE])
    os.environ[LOG_VARIABLE] = str(path)
    try:
        yield path
    except ConfigError:  # the command line or the spec, refused before anything ran: nothing to log
        raise
    except DeltaflowError as exc:
        append_trace(path, exc)
        exc.hint = "; ".join(h for h in (exc.hint, f"the full error is in {path}") if h)
        raise
    except Exception as exc:
        append_trace(path, exc)
        raise InternalError(f"{type(exc).__name__}: {first_line(exc)}",
                            hint=f"the full error is in {path}") from exc
    finally:
        if own:
            del os.environ[LOG_VARIABLE]


def append_trace(path: Path | None, exc: BaseException) -> None:
    """Append ``exc``'s stack trace to the run log ``path`` (none: nothing), never failing."""
    if path is None:
        return
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as log:
            moment = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
            log.write(f"\n{moment} UTC deltaflow: the command failed\n")
            log.write("".join(traceback.format_exception(exc)))


@contextmanager
def jvm_output(path: str | None) -> Iterator[None]:
    """Start the JVM inside this block to have it print into ``path`` (appended) instead of stderr.

    The JVM inherits the process's file descriptor 2 when it is launched and keeps it; Python's own stderr
    is given back at the end of the block.
    """
    if path is None:
        yield
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(path, "ab") as log:
            os.dup2(log.fileno(), 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


#: pyspark's own loggers that print to stderr: an analysis error's query context, as a JSON record.
PYSPARK_LOGGERS = ("DataFrameQueryContextLogger", "SQLQueryContextLogger")


class _RunLogHandler(logging.Handler):
    """Appends each record to the run log open when it is logged (none open: the record is dropped)."""

    def emit(self, record: logging.LogRecord) -> None:
        path = os.environ.get(LOG_VARIABLE)
        if path is None:
            return
        with contextlib.suppress(OSError), open(path, "a") as log:
            log.write(self.format(record) + "\n")


def pyspark_logs_to_run_log() -> None:
    """Send pyspark's own log records (:data:`PYSPARK_LOGGERS`) to the run log, not to the terminal.

    An analysis error logged its query context to stderr as a JSON record with a stack trace, before
    deltaflow's one line. With ``deltaflow -v`` they stay on the terminal.
    """
    if "DELTAFLOW_LOG_LEVEL" in os.environ:
        return
    from pyspark.logger import PySparkLogger

    for name in PYSPARK_LOGGERS:
        logger = PySparkLogger.getLogger(name)
        if not any(isinstance(h, _RunLogHandler) for h in logger.handlers):
            for handler in list(logger.handlers):
                logger.removeHandler(handler)
            logger.addHandler(_RunLogHandler())  # PySparkLogger gives it its JSON format
        logger.propagate = False
