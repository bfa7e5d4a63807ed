"""The Spark listener that feeds the event log: each query progress, as one JSON string, to an EventLog.

Examples:
    >>> spark.streams.addListener(event_log_listener(log, on_progress=print))  # doctest: +SKIP

"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from deltaflow.runtime.event_log import REFRESH_KEY, EventLog, batch_event, with_input_rows
from deltaflow.runtime.jvm_sockets import no_delay


def event_log_listener(log: EventLog, on_progress: Callable[[dict[str, Any]], None] | None = None,
                       on_terminated: Callable[[], None] | None = None,
                       refresh_of: Callable[[str, int], dict[str, Any] | None] | None = None) -> Any:
    """A Spark ``StreamingQueryListener`` sending every progress to ``log`` (and, parsed, to ``on_progress``).

    Spark calls it on its listener thread: ``on_progress`` and ``on_terminated`` (a query ended) should only
    hand over. Each progress crosses from the JVM as its JSON, in one call (:class:`_JsonEvents`).
    ``refresh_of(flow, batch_id)``: what a materialized view's batch refreshed, added to its progress under
    :data:`REFRESH_KEY` (Spark's progress counts the rows the view read, not those it wrote).
    """
    from pyspark import SparkContext
    from pyspark.sql.streaming.listener import StreamingQueryListener

    from deltaflow.sinks.read_rows import observed_rows

    class EventLogListener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            try:
                progress = json.loads(event)
                if refresh_of is not None and (refresh := refresh_of(progress.get("name") or "",
                                                                     int(progress["batchId"]))):
                    progress[REFRESH_KEY] = refresh
                logged = batch_event(log.pipeline, log.run_id, progress)
                carried = log.carried.get(logged.flow, ())
                if (rows := observed_rows(progress)) is not None:  # a query reading its input more than once
                    logged = with_input_rows(logged, rows)
                for flow in (logged.flow, *carried):
                    log.add(replace(logged, flow=flow))
                if on_progress is not None:
                    on_progress(progress)
            except Exception as exc:  # never let logging break the listener bus
                log.error = exc

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            # How each flow ended (completed, stopped, failed) is logged by the run; see PipelineRun.
            if on_terminated is not None:
                on_terminated()

        @property
        def _jlistener(self) -> Any:  # what spark.streams.addListener registers in the JVM
            if not hasattr(self, "_jsonlistener"):
                jvm = SparkContext._jvm
                assert jvm is not None
                self._jsonlistener = jvm.PythonStreamingQueryListenerWrapper(_JsonEvents(self))
            return self._jsonlistener

    return EventLogListener()


class _JsonEvents:
    """Spark's listener interface for Python, handing each progress over as its JSON string.

    PySpark's own adapter builds a Python object from a progress with one py4j call per field, source,
    state operator and metric: in the clickstream pipeline at 5,000 events/s that was 1.5 CPU-seconds of
    the JVM's listener bus and more of the driver's Python per 100,000 events, most of deltaflow's own
    overhead (``benchmarks/profile_pipeline.py``). One call, ``progress().json()``, carries all of it.
    """

    def __init__(self, listener: Any) -> None:
        self.listener = listener

    def onQueryStarted(self, jevent: Any) -> None:
        pass

    def onQueryProgress(self, jevent: Any) -> None:
        no_delay()  # a progress with observed metrics can be tens of KB
        self.listener.onQueryProgress(jevent.progress().json())

    def onQueryIdle(self, jevent: Any) -> None:
        pass

    def onQueryTerminated(self, jevent: Any) -> None:
        self.listener.onQueryTerminated(None)

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]  # noqa: RUF012
