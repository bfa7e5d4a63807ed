"""The sections of ``deltaflow.yml`` (kafka, trigger, maintenance, s3, lease), one model each.

Every key has a description here, and only here: the JSON Schema editors complete the spec with
(``deltaflow schema``) and the reference page of the documentation are generated from these models.

Examples:
    >>> TriggerSpec(mode="continuous", interval="10 seconds").interval
    '10 seconds'

"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from deltaflow.errors import ConfigError

#: A processing-time interval as Spark reads one: ``10 seconds``, ``500 ms``, ``1 minute``.
INTERVAL = re.compile(r"^\s*\d+(\.\d+)?\s*(ms|millisecond|second|minute|hour)s?\s*$", re.IGNORECASE)

TriggerMode = Literal["available_now", "continuous", "once"]


class Strict(BaseModel):
    """A spec model: unknown keys are errors (a misspelt key never goes unnoticed), values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class KafkaSpec(Strict):
    """Where the Kafka brokers are and how to reach them."""

    bootstrap_servers: str = Field(
        default="127.0.0.1:19092", description="The brokers, host:port[,host:port...].",
        examples=["broker-1:9092,broker-2:9092"])
    options: dict[str, str] = Field(
        default_factory=dict, description="Kafka client properties passed to every Kafka source (prefixed "
        "with 'kafka.'): security.protocol, sasl.mechanism, sasl.jaas.config... A value from ${ENV} is a "
        "secret, never printed.", examples=[{"security.protocol": "SASL_SSL"}])


def _check_interval(value: str | None) -> str | None:
    if value is not None and not INTERVAL.match(value):
        raise ValueError(f"'{value}' is not a duration like '10 seconds' or '500 ms'")
    return value.strip() if value is not None else None


def check_duration(value: str | None) -> str | None:
    """``value`` if it reads as a duration (``7d``, ``36h``, ``10 minutes``), else a ValueError."""
    if value is not None:
        from deltaflow.spec.durations import parse_duration

        try:
            parse_duration(value)
        except ConfigError as exc:
            raise ValueError(exc.message) from None
    return value


_MODE = ("available_now: process what is there, then exit; continuous: run until stopped, a batch every "
         "interval; once: one batch per flow")
_INTERVAL_TEXT = ("The processing-time interval of continuous flows; '0 seconds' starts the next batch as "
                  "soon as the last one ends.")


class FlowTriggerSpec(Strict):
    """One flow's trigger, overriding the pipeline's: either key may be left out."""

    mode: TriggerMode | None = Field(default=None, description=_MODE)
    interval: str | None = Field(default=None, description=_INTERVAL_TEXT, examples=["5 minutes"])

    _interval_is_duration = field_validator("interval")(_check_interval)


class TriggerSpec(Strict):
    """How often flows run."""

    mode: TriggerMode = Field(default="available_now", description=_MODE)
    interval: str = Field(default="0 seconds", description=_INTERVAL_TEXT, examples=["10 seconds"])
    flows: dict[str, FlowTriggerSpec] = Field(
        default_factory=dict, description="Per-flow overrides of mode and interval.",
        examples=[{"gold_daily_sales": {"interval": "5 minutes"}}])

    _interval_is_duration = field_validator("interval")(_check_interval)


class MaintenanceSpec(Strict):
    """The table upkeep a run carries out itself, beside its flows (all off by default).

    Delta's own auto-compaction after each write is a table property instead:
    ``table_properties: {delta.autoOptimize.autoCompact: "true"}``.
    """

    optimize_every: int = Field(
        default=0, ge=0, description="Compact a table once this many micro-batches have been written to it "
        "(0: never).", examples=[100])
    optimize_interval: str | None = Field(
        default=None, description="Compact, this often, every table written since its last compaction.",
        examples=["1 hour"])
    zorder: dict[str, list[str]] = Field(
        default_factory=dict, description="The columns each table's compactions (and 'deltaflow optimize') "
        "cluster by.", examples=[{"silver_clicks": ["user_id"]}])
    vacuum_every: str | None = Field(
        default=None, description="Run the stream-aware VACUUM of every table this often, keeping each "
        "table's delta.deletedFileRetentionDuration.", examples=["1 day"])

    _durations = field_validator("optimize_interval", "vacuum_every")(check_duration)


class S3Spec(Strict):
    """How to reach S3 or an S3-compatible server for ``storage: s3a://bucket/prefix``.

    Each key reaches Spark (``spark.hadoop.fs.s3a.*``) and the JVM-free readers alike. Leave out the keys
    for AWS's defaults (its endpoint, the default credential chain).
    """

    endpoint: str | None = Field(default=None, description="The server's URL (default: AWS's).",
                                 examples=["http://127.0.0.1:19000"])
    region: str = Field(default="us-east-1", description="The bucket's region.")
    access_key: str | None = Field(default=None, description="The access key (never printed; use ${ENV}).")
    secret_key: str | None = Field(default=None, description="The secret key (never printed; use ${ENV}).")
    path_style: bool = Field(default=False, description="Address buckets by path (S3-compatible servers).")
    retry_budget: str = Field(
        default="2 minutes", description="How long a storage call may keep failing (throttled, 5xx, "
        "timed out, connection lost) before the run stops on it, for deltaflow's own calls, Spark's S3A "
        "and deltalake alike.", examples=["5 minutes"])

    _budget_is_duration = field_validator("retry_budget")(check_duration)

    @property
    def retry_seconds(self) -> float:
        """``retry_budget`` in seconds."""
        from deltaflow.spec.durations import parse_duration

        return parse_duration(self.retry_budget).total_seconds()


class MetastoreSpec(Strict):
    """Where each run registers the pipeline's tables by name: a Hive Metastore.

    Each table is registered as an external Delta table at its place under ``storage``, in ``database``
    (default: the pipeline's name). Without ``uri``, the metastore is embedded (Derby, under ``storage``):
    nothing to start, readable by one Spark application at a time. With a ``uri`` (``deltaflow metastore
    start``, or a shared service), any Spark application configured with it and Delta reads the tables as
    ``database.table``, while runs write them.
    """

    uri: str | None = Field(default=None, pattern=r"^thrift://[^/:]+:[0-9]+$",
                            description="The Hive Metastore's Thrift address (default: embedded, under "
                            "storage).", examples=["thrift://127.0.0.1:9083"])
    database: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
                                 description="The database the tables are registered in (default: the "
                                 "pipeline's name, '-' as '_'; created if need be).", examples=["shop"])


class LeaseSpec(Strict):
    """How a run holds the tables it writes (one writing run per table)."""

    ttl: str = Field(
        default="30 seconds", description="How long a run's hold on its tables outlives its last renewal: "
        "how long the tables of a crashed run stay held.", examples=["1 minute"])

    _ttl_is_duration = field_validator("ttl")(check_duration)
