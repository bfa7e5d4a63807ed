"""One error root for everything deltaflow reports to a user.

Every error carries a stable ``code`` (scripts may match on it) and, where known, the location at fault:
a spec file and field, a definition file and line, a flow name, or a network address. ``str(error)`` is
one line: ``DF-CONFIG deltaflow.yml: unknown key 'kafak' (did you mean 'kafka'?)``.

Examples:
    >>> err = ConfigError("unknown key 'kafak'", location="deltaflow.yml")
    >>> str(err)
    "DF-CONFIG deltaflow.yml: unknown key 'kafak'"

"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deltaflow.runtime.outcomes import FlowOutcome


class DeltaflowError(Exception):
    """Root of every error deltaflow raises on purpose.

    Args:
        message: What is wrong, in one sentence, without the location.
        location: Where: ``file``, ``file:line``, ``file: field``, ``flow 'name'`` or an address.
        hint: What the user can do about it (shown after the message).

    """

    code = "DF"
    #: What a message of this code looks like (the reference's error-code page shows it).
    example = ""
    #: What usually makes it go away (the documentation's error reference lists it).
    fix = ""

    def __init__(self, message: str, *, location: str | None = None, hint: str | None = None) -> None:
        self.message = message
        self.location = location
        self.hint = hint
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f" {self.location}:" if self.location else ""
        hint = f" ({self.hint})" if self.hint else ""
        return " ".join(f"{self.code}{where} {self.message}{hint}".split())


class ConfigError(DeltaflowError):
    """The pipeline spec (``deltaflow.yml``) or a command-line option is wrong."""

    code = "DF-CONFIG"
    example = "deltaflow.yml: unknown key 'kafak' (did you mean 'kafka'?)"
    fix = (
        "Correct the key or option the message names (the hint suggests the likely spelling); `deltaflow "
        "schema` lists every key."
    )


class ArgumentError(ConfigError):
    """A verb's arguments are wrong: an unknown or unfitting table, a missing or clashing option, a bad value.

    Told before Spark starts (``deltaflow`` exits 2, as for any wrong command line); a ``ConfigError``, so
    ``except ConfigError`` still catches it.

    Examples:
        >>> str(ArgumentError("give --to-version or --to-timestamp", location="rewind"))
        'DF-USAGE rewind: give --to-version or --to-timestamp'

    """

    code = "DF-USAGE"
    example = 'rewind: give the version (--to-version) or the time (--to-timestamp) to rewind to'
    fix = "Correct the command line as the message says; `deltaflow VERB --help` lists its arguments."


class SetupError(DeltaflowError):
    """The machine is missing something deltaflow needs (JVM jars, Java, Maven)."""

    code = "DF-SETUP"
    example = "Maven ('mvn') is not on PATH (install Maven, then run 'make setup')"
    fix = (
        "Run `make setup` (or `deltaflow setup`) on a machine with Java 17+ and Maven, and network access "
        "to Maven Central."
    )


class GraphError(DeltaflowError):
    """Dataset definitions do not form a valid pipeline (unknown input, cycle, duplicate name...)."""

    code = "DF-GRAPH"
    example = (
        "transformations/pipeline.py:26: flow 'silver_events' failed to build: "
        '[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column ... with name `corrupt` cannot be resolved. Did you'
        ' mean one of the following? [`amount`, `ts`, `action`, `user_id`, `_corrupt_record`].'
    )
    fix = (
        "Fix the definition at the file and line given: declare the dataset read, break the cycle, rename "
        "the duplicate."
    )


class SourceError(DeltaflowError):
    """A source cannot be read: unreachable broker, missing topic or folder, bad option."""

    code = "DF-SOURCE"
    example = "127.0.0.1:19092: cannot create topic 'clicks': no broker answered within 30s"
    fix = "Start the broker or create the topic or folder named; check the source options against the hint."


class SinkError(DeltaflowError):
    """A sink cannot be written."""

    code = "DF-SINK"
    example = "materialized view 'gold': lost 10 commits in a row to concurrent writers: ..."
    fix = (
        "Check the table's schema against the flow's output (a new column needs merge_schema=True); fix, "
        "then run again."
    )


class FlowError(DeltaflowError):
    """One or more flows failed while running."""

    code = "DF-FLOW"
    example = (
        "1 flow failed: 'silver_events' (transformations/pipeline.py:21): ...; skipped downstream: "
        "'gold_actions' (the full error is in data/_logs/20261203T172140Z-29948.log)"
    )
    #: How each flow of the run ended, when a run raised it (the CLI prints them).
    outcomes: tuple[FlowOutcome, ...] = ()
    fix = (
        "Read the cause in the line (the whole error is in the run's log the line names); fix the data or "
        "the definition and run again: nothing is written twice."
    )


class StorageError(DeltaflowError):
    """The pipeline's storage cannot be reached: endpoint, credentials, bucket."""

    code = "DF-STORAGE"
    example = 's3.retry_budget: GetObject s3a://lake/shop/... failed 41 times in 118 s: SlowDown'
    fix = "Check the storage's endpoint, credentials, bucket and free space; run again once it answers."


class LeaseError(DeltaflowError):
    """A table is held by another run (one writing run per table), or this run lost its hold."""

    code = "DF-LEASE"
    example = (
        "table 'bronze_events' is held by run 3f2a... (pid 4242 on host-1) until 17:22:40, unless renewed"
        " (stop that run first; a crashed run's hold runs out after the lease ttl)"
    )
    fix = "Wait for the other run to end (or for lease.ttl to pass, if it crashed), then run again."


class KafkaBrokerError(DeltaflowError):
    """The embedded Kafka broker failed to start, stop or answer."""

    code = "DF-KAFKA"
    example = '127.0.0.1:19092: the broker was not ready within 60s (see ~/.cache/deltaflow/kafka/broker.log)'
    fix = "Read the broker's log the message names; `deltaflow kafka stop`, then start it again."


class InternalError(DeltaflowError):
    """Something failed that deltaflow did not expect: a bug, or a failure it does not recognise.

    The run's log holds the stack trace.
    """

    code = "DF-INTERNAL"
    example = (
        'Py4JError: An error occurred while calling o123.start (the full error is in '
        'data/_logs/20261203T172140Z-29948.log)'
    )
    fix = ("Read the stack trace in the run's log the message names; run again (nothing is lost: the tables "
           "and checkpoints are as the last committed batch left them), and report it if it happens again.")


def first_line(exc: BaseException) -> str:
    r"""One line saying why ``exc`` happened: the root cause's class and message (≤ 300 chars).

    Examples:
        >>> first_line(ValueError("bad value\nmore detail"))
        'bad value'
        >>> first_line(RuntimeError("Job aborted.\nCaused by: java.lang.IllegalStateException: closed"))
        'IllegalStateException: closed'

    """
    if isinstance(exc, DeltaflowError):  # ours: already one line, with its location and hint
        return str(exc).splitlines()[0]
    while getattr(exc, "_cause", None) is not None:  # pyspark's CapturedException chain
        exc = exc._cause  # type: ignore[attr-defined]
    text = str(getattr(exc, "desc", None) or exc).strip()
    trace = str(getattr(exc, "stackTrace", None) or getattr(exc, "_stackTrace", None) or "")
    if (python := _python_error(text + "\n" + trace)) is not None:
        return python[:300]
    if (lost := _kafka_data_loss(text)) is not None:
        return lost
    causes = [line.split("Caused by:", 1)[1] for line in (text + "\n" + trace).splitlines()
              if line.lstrip().startswith("Caused by:")]
    if causes:
        text = re.sub(r"^\s*(?:[\w$]+\.)*([\w$]+(?:Exception|Error)): ", r"\1: ", causes[-1])
    text = _without_sqlstate(text)
    return text.splitlines()[0][:300] if text else type(exc).__name__


def _kafka_data_loss(text: str) -> str | None:
    r"""Spark's Kafka data-loss error (several lines) as one line that says what to do.

    Examples:
        >>> _kafka_data_loss("Some data may have been lost because they are not available in Kafka any "
        ...     "more;\nReason: Partition t-0 offset was changed from 40 to 10.\n")[:63]
        'Kafka records this flow had not read are gone: Partition t-0 of'

    """
    if "Some data may have been lost because they are not available in Kafka" not in text:
        return None
    reason = re.search(r"^Reason: (.+?)\.?$", text, re.MULTILINE)
    why = reason.group(1) if reason else "offsets its checkpoint expects are missing"
    return (f"Kafka records this flow had not read are gone: {why} (the topic was deleted and recreated, "
            "or retention removed them); it stops rather than skip them: pass fail_on_data_loss=False to "
            "dp.read_kafka to go on from what is there")


def _python_error(text: str) -> str | None:
    r"""The error a Python traceback inside a Spark error ends with (a foreachBatch function raised).

    When that is py4j's "An error occurred while calling o823.execute", the Java error under it: its root
    cause, the last ``Caused by:`` of the Java trace py4j prints (a task's failure is under the job's).

    Examples:
        >>> _python_error("Traceback (most recent call last):\n  File \"x.py\"\npy4j.protocol.Py4JJavaError: "
        ...               "An error occurred while calling o8.execute.\n: java.lang.VirtualMachineError: "
        ...               "Out of space in CodeCache\n\tat java.base/x")
        'VirtualMachineError: Out of space in CodeCache'
        >>> _python_error("Traceback (most recent call last):\npy4j.protocol.Py4JJavaError: An error "
        ...               "occurred while calling o2.writeFiles.\n: org.apache.spark.SparkException: Task "
        ...               "failed\n\tat org.x\nCaused by: org.apache.spark.SparkRuntimeException: "
        ...               "[USER_RAISED_EXCEPTION] boom SQLSTATE: P0001\n\t... 12 more")
        'SparkRuntimeException: [USER_RAISED_EXCEPTION] boom'

    """
    if "Traceback (most recent call last):" not in text:
        return None
    after = text.rsplit("Traceback (most recent call last):", 1)[1]
    python = after.split("\n\tat ", 1)[0]
    raised: list[tuple[str, str]] = re.findall(r"^([A-Za-z_][\w.]*): (.+)$", python, re.MULTILINE)
    if not raised:
        return None
    name, message = raised[-1]
    if name.endswith("Py4JJavaError"):
        java: list[tuple[str, str]] = re.findall(r"^(?:Caused by|): ([\w.$]+): (.+)$", after, re.MULTILINE)
        if java:
            name, message = java[-1]
    if re.match(r"DF-[A-Z]+ ", message):
        return message
    return _without_sqlstate(f"{name.rsplit('.', 1)[-1]}: {message}")


def _without_sqlstate(text: str) -> str:
    """``text`` without Spark's ``SQLSTATE: <code>`` suffixes, stripped."""
    return re.sub(r"\s*SQLSTATE: \w+", "", text).strip()
