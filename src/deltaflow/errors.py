"""One error root for everything deltaflow reports to a user.

Every error carries a stable ``code`` (scripts may match on it) and, where known, the location at fault:
a spec file and field, a definition file and line, a flow name, or a network address. ``str(error)`` is
one line: ``DF-CONFIG deltaflow.yml: unknown key 'kafak' (did you mean 'kafka'?)``.

Example:
    >>> err = ConfigError("unknown key 'kafak'", location="deltaflow.yml")
    >>> str(err)
    "DF-CONFIG deltaflow.yml: unknown key 'kafak'"

"""

from __future__ import annotations


class DeltaflowError(Exception):
    """Root of every error deltaflow raises on purpose.

    Args:
        message: What is wrong, in one sentence, without the location.
        location: Where: ``file``, ``file:line``, ``file: field``, ``flow 'name'`` or an address.
        hint: What the user can do about it (shown after the message).

    """

    code = "DF"

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


class SetupError(DeltaflowError):
    """The machine is missing something deltaflow needs (JVM jars, Java, Maven)."""

    code = "DF-SETUP"


class GraphError(DeltaflowError):
    """Dataset definitions do not form a valid pipeline (unknown input, cycle, duplicate name...)."""

    code = "DF-GRAPH"


class SourceError(DeltaflowError):
    """A source cannot be read: unreachable broker, missing topic or folder, bad option."""

    code = "DF-SOURCE"


class SinkError(DeltaflowError):
    """A sink cannot be written."""

    code = "DF-SINK"


class FlowError(DeltaflowError):
    """One or more flows failed while running."""

    code = "DF-FLOW"


class KafkaBrokerError(DeltaflowError):
    """The embedded Kafka broker failed to start, stop or answer."""

    code = "DF-KAFKA"
