"""Expectations: data quality rules on a flow's rows, with what to do with the rows that fail them.

Stack them on a dataset function, in either order with ``@dp.table`` (or with Spark Declarative
Pipelines' ``@dp.table`` from ``pyspark.pipelines``)::

    @dp.table
    @dp.expect("has_user", "user_id IS NOT NULL")                 # keep the row, count the failure
    @dp.expect_or_drop("positive_amount", "amount > 0")           # drop the row, count it
    @dp.expect_or_quarantine("known_type", "event_type IN ('view', 'click', 'purchase')")
    @dp.expect_or_fail("has_id", "event_id IS NOT NULL")          # stop the flow, naming the rule
    def silver_events(): ...

A condition that is NULL for a row counts as failed. When a row fails several rules the strictest action
wins: fail, then quarantine, then drop. Quarantined rows go to ``<table>_quarantine`` with the whole row
as JSON, the names of the rules it failed, its source position (Kafka topic/partition/offset or file, when
the row carries them), the batch id and the time, in the same idempotent micro-batch as the table's own
rows. Every batch's counts (rows, each rule's failures, dropped, quarantined) are in the event log.

Examples:
    >>> expectations_of(lambda: None)
    ()

"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from deltaflow.errors import GraphError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

Action = Literal["warn", "drop", "quarantine", "fail"]
F = TypeVar("F", bound=Callable[..., Any])

#: The name of the observed metrics holding each batch's expectation counts (see the event log).
METRICS = "deltaflow_expectations"
ROWS, DROPPED, QUARANTINED, UNPARSED = "_rows", "_dropped", "_quarantined", "_unparsed"
#: Columns a flow may carry to its sink but never into its table: why each row goes to quarantine, and the
#: raw record (text and, when it was not UTF-8, bytes) of rows parsed by ``dp.parse_json``.
FAILED, RAW, RAW_BYTES = "_df_failed", "_df_raw", "_df_raw_bytes"
INTERNAL_COLUMNS = (FAILED, RAW, RAW_BYTES)
_ATTRIBUTE = "__deltaflow_expectations__"


@dataclass(frozen=True)
class Expectation:
    """One named rule: a SQL condition every row should meet, and what to do with those that do not."""

    name: str
    condition: str
    action: Action


def expectations_of(func: Callable[..., Any]) -> tuple[Expectation, ...]:
    """The expectations stacked on ``func``, outermost last."""
    return tuple(getattr(func, _ATTRIBUTE, ()))


def _stack(action: Action, rules: Mapping[str, str]) -> Callable[[F], F]:
    for name, condition in rules.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise GraphError(f"expectation name {name!r} must be an identifier (letters, digits, _)")
        if not isinstance(condition, str) or not condition.strip():
            raise GraphError(f"expectation '{name}' needs a SQL condition, e.g. \"amount > 0\"")

    def decorate(func: F) -> F:
        if func is None:  # stacked above a decorator that returns None: Spark Declarative Pipelines' own
            from deltaflow.define.registry import active_graph

            flows = list(active_graph("an expectation above an SDP decorator").flows.values())
            if not flows:
                raise GraphError("an expectation must decorate a dataset function")
            decorate(flows[-1].func)
            return func
        known = expectations_of(func)
        for name in rules:
            if any(e.name == name for e in known):
                raise GraphError(f"expectation '{name}' is declared twice on {func.__name__}")
        added = tuple(Expectation(name, condition, action) for name, condition in rules.items())
        setattr(func, _ATTRIBUTE, known + added)
        return func

    return decorate


def expect(name: str, condition: str) -> Callable[[F], F]:
    """Count the rows failing ``condition``; keep them.

    Examples:
        >>> @expect("has_user", "user_id IS NOT NULL")
        ... def silver(): ...
        >>> expectations_of(silver)[0].action
        'warn'

    """
    return _stack("warn", {name: condition})


def expect_or_drop(name: str, condition: str) -> Callable[[F], F]:
    """Drop the rows failing ``condition`` (counted in the event log)."""
    return _stack("drop", {name: condition})


def expect_or_fail(name: str, condition: str) -> Callable[[F], F]:
    """Stop the flow at the first batch with a row failing ``condition``, naming the rule.

    Nothing of that batch is written.
    """
    return _stack("fail", {name: condition})


def expect_or_quarantine(name: str, condition: str) -> Callable[[F], F]:
    """Send the rows failing ``condition`` to ``<table>_quarantine`` instead of the table."""
    return _stack("quarantine", {name: condition})


def expect_all(rules: Mapping[str, str]) -> Callable[[F], F]:
    """:func:`expect` for each ``name: condition`` of ``rules``."""
    return _stack("warn", rules)


def expect_all_or_drop(rules: Mapping[str, str]) -> Callable[[F], F]:
    """:func:`expect_or_drop` for each ``name: condition`` of ``rules``."""
    return _stack("drop", rules)


def expect_all_or_fail(rules: Mapping[str, str]) -> Callable[[F], F]:
    """:func:`expect_or_fail` for each ``name: condition`` of ``rules``."""
    return _stack("fail", rules)


def expect_all_or_quarantine(rules: Mapping[str, str]) -> Callable[[F], F]:
    """:func:`expect_or_quarantine` for each ``name: condition`` of ``rules``."""
    return _stack("quarantine", rules)


def carries_failures(df: DataFrame) -> bool:
    """Whether ``df`` says for each row why it goes to quarantine (quarantine rules or ``dp.parse_json``)."""
    return FAILED in df.columns


def passing(df: DataFrame) -> DataFrame:
    """The rows of a checked ``df`` that belong in the table."""
    from pyspark.sql import functions as F

    return df.where(F.size(FAILED) == 0) if carries_failures(df) else df


def table_schema(df: DataFrame) -> StructType:
    """The schema of the rows ``df`` writes to its table: without the columns only quarantine uses."""
    from pyspark.sql.types import StructType

    return StructType([f for f in df.schema.fields if f.name not in INTERNAL_COLUMNS])


def checked(df: DataFrame, flow: str, expectations: tuple[Expectation, ...]) -> DataFrame:
    """``df`` with the expectations applied, except quarantine.

    Rows failing a fail-rule raise an error naming the rule and the flow; rows failing a drop-rule (and no
    quarantine-rule) are dropped; the per-batch counts are observed as :data:`METRICS`. With quarantine
    rules, or records ``dp.parse_json`` could not read, the result keeps every other row and has a
    :data:`FAILED` column: why each row goes to quarantine (empty for rows that belong in the table).
    """
    from pyspark.sql import functions as F

    # A record dp.parse_json could not read is quarantined for that alone: the rules judge parsed rows.
    unparsed = F.size(FAILED) > 0 if FAILED in df.columns else F.lit(False)

    def failed(rule: Expectation) -> Column:
        return ~unparsed & ~F.coalesce(F.expr(rule.condition), F.lit(False))

    def any_failed(action: Action) -> Column:
        result = F.lit(False)
        for rule in expectations:
            if rule.action == action:
                result = result | failed(rule)
        return result

    quarantined = any_failed("quarantine") | unparsed
    dropped = any_failed("drop") & ~quarantined
    df = df.observe(METRICS, F.count(F.lit(1)).alias(ROWS), F.count_if(dropped).alias(DROPPED),
                    F.count_if(quarantined).alias(QUARANTINED), F.count_if(unparsed).alias(UNPARSED),
                    *[F.count_if(failed(rule)).alias(rule.name) for rule in expectations])
    keep = ~dropped  # one filter, so a fail-rule is checked on every row, dropped or not
    for rule in reversed([e for e in expectations if e.action == "fail"]):
        message = f"expectation '{rule.name}' ({rule.condition}) failed in flow '{flow}'"
        keep = F.when(failed(rule), F.raise_error(F.lit(message))).otherwise(keep)
    df = df.where(keep)
    if any(e.action == "quarantine" for e in expectations):
        names = [F.when(failed(rule), F.lit(rule.name))
                 for rule in expectations if rule.action == "quarantine"]
        reasons = F.filter(F.array(*names), lambda name: name.isNotNull())
        df = df.withColumn(FAILED, F.concat(F.col(FAILED), reasons) if FAILED in df.columns else reasons)
    return df
