"""When flows run: process what is available and stop, run continuously, or run one batch.

Example:
    >>> Trigger("continuous", "5 seconds").describe()
    'continuous, every 5 seconds'

"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from deltaflow.spec import TriggerMode

if TYPE_CHECKING:
    from pyspark.sql.streaming.readwriter import DataStreamWriter


@dataclass(frozen=True)
class Trigger:
    """A trigger mode and, for ``continuous``, the processing-time interval."""

    mode: TriggerMode = "available_now"
    interval: str = "0 seconds"

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
