"""``GET /metrics``: the dashboard's figures in Prometheus' text format, named by Prometheus' conventions.

Every series carries ``pipeline`` and ``flow`` (or ``table``) labels. Counters are totals over the event
log (every logged batch), so they equal what the log says; gauges are the dashboard's current figures.

==============================================  =======  ===============================================
name                                            type     what
==============================================  =======  ===============================================
``deltaflow_flow_batches_total``                counter  micro-batches logged
``deltaflow_flow_input_rows_total``             counter  rows read
``deltaflow_flow_dropped_rows_total``           counter  rows dropped by ``expect_or_drop`` rules
``deltaflow_flow_quarantined_rows_total``       counter  rows quarantined (rules, unparsable records)
``deltaflow_expectation_failed_rows_total``     counter  rows failing each expectation (``expectation``)
``deltaflow_flow_batch_duration_seconds``       summary  batch durations (``_count``, ``_sum``)
``deltaflow_view_refreshes_total``              counter  a materialized view's refreshes
``deltaflow_view_rows_written_total``           counter  rows its refreshes wrote (a MERGE: groups changed)
``deltaflow_flow_last_batch_duration_seconds``  gauge    the newest batch's duration
``deltaflow_flow_last_batch_timestamp_seconds`` gauge    when the newest batch with rows ended
``deltaflow_flow_input_rows_per_second``        gauge    rows read per second over the rate window
``deltaflow_flow_processed_rows_per_second``    gauge    rows per second spent in batches, same window
``deltaflow_flow_backlog_kafka_offsets``        gauge    Kafka offsets not read yet
``deltaflow_flow_backlog_delta_versions``       gauge    Delta versions not read yet
``deltaflow_flow_state``                        gauge    1 for the flow's state (``state`` label), else 0
``deltaflow_table_version`` / ``_files`` / ``_rows``  gauge  each table's version, files and rows
==============================================  =======  ===============================================

Examples:
    >>> print(render({"pipeline": "p", "flows": [], "maintenance": []}, []).decode()[:40])  # doctest: +SKIP

"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from deltaflow.commands.status import quality_totals

STATES = ("running", "falling_behind", "completed", "stopped", "failed", "skipped", "silent")


def families(state: dict[str, Any], events: list[dict[str, Any]]) -> Iterator[Any]:
    """The metric families of a dashboard ``state`` and the event-log rows it was built from."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily

    pipeline = state["pipeline"]
    flow_labels = ["pipeline", "flow"]

    def counter(name: str, doc: str, labels: list[str] = flow_labels) -> CounterMetricFamily:
        return CounterMetricFamily(f"deltaflow_{name}", doc, labels=labels)

    def gauge(name: str, doc: str, labels: list[str] = flow_labels) -> GaugeMetricFamily:
        return GaugeMetricFamily(f"deltaflow_{name}", doc, labels=labels)

    batches, rows, dropped, quarantined = (counter("flow_batches", "Micro-batches logged."),
                                           counter("flow_input_rows", "Rows read."),
                                           counter("flow_dropped_rows", "Rows dropped by expect_or_drop."),
                                           counter("flow_quarantined_rows", "Rows quarantined."))
    failed = counter("expectation_failed_rows", "Rows failing an expectation.", [*flow_labels, "expectation"])
    durations = SummaryMetricFamily("deltaflow_flow_batch_duration_seconds", "Batch durations.",
                                    labels=flow_labels)
    refreshes, written = (counter("view_refreshes", "A materialized view's refreshes."),
                          counter("view_rows_written", "Rows a materialized view's refreshes wrote."))
    per_flow: dict[str, list[dict[str, Any]]] = {}
    for row in events:
        if row["kind"] == "batch":
            per_flow.setdefault(row["flow"], []).append(row)
    for flow, logged in sorted(per_flow.items()):
        labels = [pipeline, flow]
        totals = quality_totals(logged)
        batches.add_metric(labels, len(logged))
        rows.add_metric(labels, sum(r["input_rows"] for r in logged))
        dropped.add_metric(labels, totals.get("_dropped", 0))
        quarantined.add_metric(labels, totals.get("_quarantined", 0))
        for name, count in sorted(totals.items()):
            if not name.startswith("_"):
                failed.add_metric([*labels, name], count)
        durations.add_metric(labels, len(logged), sum(r["duration_ms"] for r in logged) / 1000)
        if refreshed := [json.loads(r["refresh"]) for r in logged if r.get("refresh")]:
            refreshes.add_metric(labels, len(refreshed))
            written.add_metric(labels, sum(r.get("rows_written") or 0 for r in refreshed))
    yield from (batches, rows, dropped, quarantined, failed, durations, refreshes, written)

    gauges = {key: gauge(name, doc) for key, name, doc in (
        ("last_duration_ms", "flow_last_batch_duration_seconds", "The newest batch's duration."),
        ("last_batch_at", "flow_last_batch_timestamp_seconds", "When the newest batch with rows ended."),
        ("input_rows_per_second", "flow_input_rows_per_second", "Rows read per second over the rate window."),
        ("processed_rows_per_second", "flow_processed_rows_per_second",
         "Rows per second spent in batches over the rate window."),
        ("kafka_offsets", "flow_backlog_kafka_offsets", "Kafka offsets not read yet."),
        ("delta_versions", "flow_backlog_delta_versions", "Delta versions not read yet."))}
    states = gauge("flow_state", "1 for the flow's current state.", [*flow_labels, "state"])
    for flow in state["flows"]:
        labels = [pipeline, flow["flow"]]
        values = {**flow, **flow["backlog"]}
        for key, family in gauges.items():
            value = values.get(key)
            if key == "last_duration_ms" and value is not None:
                value = value / 1000
            if key == "last_batch_at" and value is not None:
                from datetime import datetime

                value = datetime.fromisoformat(value).timestamp()
            if value is not None:
                family.add_metric(labels, float(value))
        for name in STATES:
            states.add_metric([*labels, name], 1.0 if flow["state"] == name else 0.0)
    yield from (*gauges.values(), states)

    tables = {key: gauge(f"table_{key}", doc, ["pipeline", "table"]) for key, doc in (
        ("version", "The table's newest version."), ("files", "Data files in the table's newest version."),
        ("rows", "Rows in the table's newest version."))}
    for facts in state["maintenance"]:
        for key, family in tables.items():
            if facts.get(key) is not None:
                family.add_metric([pipeline, facts["table"]], float(facts[key]))
    yield from tables.values()


def render(state: dict[str, Any], events: list[dict[str, Any]]) -> bytes:
    """The Prometheus text exposition of :func:`families`."""
    from prometheus_client import CollectorRegistry, generate_latest

    class Snapshot:
        def collect(self) -> Iterator[Any]:
            return families(state, events)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Snapshot())
    return bytes(generate_latest(registry))
