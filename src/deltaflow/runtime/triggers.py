"""When flows run: process what is available and stop, run continuously, or run one batch.

Examples:
    >>> Trigger("continuous", "5 seconds").describe()
    'continuous, every 5 seconds'

"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from deltaflow.define.graph import suggest
from deltaflow.errors import ArgumentError, ConfigError
from deltaflow.spec import Spec, TriggerMode
from deltaflow.spec.sections import INTERVAL

if TYPE_CHECKING:
    from pyspark.sql.streaming.readwriter import DataStreamWriter


@dataclass(frozen=True)
class Trigger:
    """A trigger mode and, for ``continuous``, the processing-time interval."""

    mode: TriggerMode = "available_now"
    interval: str = "0 seconds"

    def __post_init__(self) -> None:
        if not INTERVAL.match(self.interval):  # the spec's are checked when it loads; this is an argument
            raise ArgumentError(f"'{self.interval}' is not a duration like '10 seconds' or '500 ms'",
                                location="--interval")

    @property
    def stops_by_itself(self) -> bool:
        """True for modes whose queries end once their work is done."""
        return self.mode != "continuous"

    def apply(self, writer: DataStreamWriter) -> DataStreamWriter:
        """Set this trigger on a stream writer."""
        if self.mode == "available_now":
            return writer.trigger(availableNow=True)
        if self.mode == "once":
            return writer.trigger(once=True)
        return writer.trigger(processingTime=self.interval)

    def describe(self) -> str:
        """A few words for progress output."""
        if self.mode != "continuous":
            return self.mode.replace("_", "-")
        number = re.match(r"[\d.]+", self.interval)
        if number and float(number.group()) == 0:
            return "continuous, as fast as possible"
        return f"continuous, every {self.interval}"


def flow_triggers(spec: Spec, flows: Iterable[str], base: Trigger, mode_given: bool) -> dict[str, Trigger]:
    """Each flow's trigger: ``base`` with the spec's per-flow overrides (``trigger.flows``) on top.

    A mode given on the command line (``mode_given``) wins over per-flow modes; per-flow intervals apply.

    Raises:
        ConfigError: ``trigger.flows`` names a flow the pipeline does not have.

    """
    known = list(flows)
    result = {}
    for name, override in spec.trigger.flows.items():
        if name not in known:
            raise ConfigError(f"trigger.flows: unknown flow '{name}'{suggest(name, known)}",
                              location=str(spec.path))
        mode = base.mode if mode_given or override.mode is None else override.mode
        result[name] = Trigger(mode, override.interval or base.interval)
    return result
