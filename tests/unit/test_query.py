"""`deltaflow show` and `deltaflow sql` answer over a pipeline's tables by name, without Spark."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from deltaflow.commands.query import run_sql, table_rows
from deltaflow.errors import ArgumentError, ConfigError
from deltaflow.storage import StorageLayout
from helpers import cli


@pytest.fixture
def layout(tmp_path: Path) -> StorageLayout:
    layout = StorageLayout(str(tmp_path / "storage"))
    write_deltalake(layout.table("orders"), pa.table({
        "order_id": ["o1", "o2", "o3"], "customer": ["c1", "c2", "c1"],
        "amount": pa.array([Decimal("10.50"), Decimal("3.25"), None], pa.decimal128(9, 2)),
        "at": pa.array([datetime(2026, 12, 1, 9, 30, tzinfo=UTC)] * 3, pa.timestamp("us", "UTC")),
    }))  # version 0
    write_deltalake(layout.table("orders"), pa.table({
        "order_id": ["o4"], "customer": ["c3"], "amount": pa.array([Decimal("7.00")], pa.decimal128(9, 2)),
        "at": pa.array([datetime(2026, 12, 2, tzinfo=UTC)], pa.timestamp("us", "UTC")),
    }), mode="append")  # version 1
    write_deltalake(layout.table("customers"), pa.table({"customer": ["c1", "c2", "c3"],
                                                         "tier": ["gold", "silver", "gold"]}))
    return layout


def test_show_gives_a_tables_rows_filtered_at_a_version_and_says_when_it_stopped_at_the_limit(
        layout: StorageLayout) -> None:
    everything = table_rows(layout, "orders", limit=0)
    assert everything.columns == ["order_id", "customer", "amount", "at"]
    assert sorted(r[0] for r in everything.rows) == ["o1", "o2", "o3", "o4"] and not everything.more
    first = table_rows(layout, "orders", limit=2)
    assert len(first.rows) == 2 and first.more
    assert not table_rows(layout, "orders", limit=4).more  # exactly the limit: nothing more
    rich = table_rows(layout, "orders", where="amount > 5", limit=0)
    assert sorted((r[0], r[2]) for r in rich.rows) == [("o1", Decimal("10.50")), ("o4", Decimal("7.00"))]
    assert sorted(r[0] for r in table_rows(layout, "orders", version=0, limit=0).rows) == ["o1", "o2", "o3"]
    null = table_rows(layout, "orders", where="amount IS NULL").as_dicts()
    assert null == [{"order_id": "o3", "customer": "c1", "amount": None,
                     "at": datetime(2026, 12, 1, 9, 30, tzinfo=UTC)}]


def test_sql_joins_and_aggregates_the_tables_it_names(layout: StorageLayout) -> None:
    result = run_sql(layout, """
        SELECT c.tier, count(*) AS orders, sum(o.amount) AS total
        FROM orders o JOIN "customers" c ON o.customer = c.customer
        GROUP BY c.tier ORDER BY c.tier""")
    assert result.columns == ["tier", "orders", "total"]
    assert result.rows == [("gold", 3, Decimal("17.50")), ("silver", 1, Decimal("3.25"))]


@pytest.mark.parametrize(("query", "message"), [
    ("SELEC * FROM orders", r"^sql: Expected: an SQL statement, found: SELEC at Line: 1, Column: 1$"),
    ("SELECT order_id FROM orders WHERE", r"^sql: Expected: an expression, found the end of the query$"),
    ("SELECT amout FROM orders", r"^sql: Schema error: No field named amout\. .* \(at column 8\)$"),
])
def test_a_bad_query_is_one_line_naming_where_it_is_wrong(layout: StorageLayout, query: str,
                                                          message: str) -> None:
    with pytest.raises(ArgumentError) as raised:
        run_sql(layout, query)
    assert "\n" not in str(raised.value)
    assert raised.value.code == "DF-USAGE"
    assert re.match(message, str(raised.value).removeprefix("DF-USAGE ")), str(raised.value)


def test_an_unknown_table_or_version_names_what_there_is(layout: StorageLayout) -> None:
    unknown = r"no table 'order' in this pipeline \(did you mean 'orders'\?\)"
    with pytest.raises(ArgumentError, match=unknown) as raised:
        run_sql(layout, "SELECT * FROM order")
    assert raised.value.hint == "tables: customers, orders"
    with pytest.raises(ConfigError, match=r"no table 'ordrs'"):
        table_rows(layout, "ordrs")
    with pytest.raises(ArgumentError, match=r"--version 7: orders has no such version \(it is at 1\)"):
        table_rows(layout, "orders", version=7)
    with pytest.raises(ArgumentError, match=r"--where: .*No field named nope"):
        table_rows(layout, "orders", where="nope = 1")


def test_the_command_prints_a_table_json_lines_or_csv(layout: StorageLayout, tmp_path: Path, capsys,  # type: ignore[no-untyped-def]
                                                     monkeypatch) -> None:
    spec = tmp_path / "deltaflow.yml"
    spec.write_text(f"name: shop\nstorage: {layout.root}\n")
    monkeypatch.setenv("COLUMNS", "200")
    shown = cli(capsys, "show", "orders", "--limit", "2", "--spec", str(spec))
    assert shown.returncode == 0, shown.stderr
    assert "orders: 2+ rows" in shown.stdout and "... more rows" in shown.stdout
    as_json = cli(capsys, "sql", "SELECT order_id, amount, at FROM orders WHERE order_id = 'o1'", "--json",
                  "--spec", str(spec))
    assert as_json.returncode == 0, as_json.stderr
    assert [json.loads(line) for line in as_json.stdout.splitlines()] == [
        {"order_id": "o1", "amount": "10.50", "at": "2026-12-01T09:30:00+00:00"}]
    as_csv = cli(capsys, "show", "orders", "--where", "customer = 'c1'", "--csv", "--spec", str(spec))
    assert as_csv.returncode == 0, as_csv.stderr
    rows = list(csv.reader(io.StringIO(as_csv.stdout)))
    assert rows[0] == ["order_id", "customer", "amount", "at"]
    assert sorted(r[0] for r in rows[1:]) == ["o1", "o3"]
    assert [r[2] for r in rows[1:] if r[0] == "o3"] == [""]  # a null is an empty field
    bad = cli(capsys, "sql", "SELECT * FROM orders WHERE", "--spec", str(spec))
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr == "error: DF-USAGE sql: Expected: an expression, found the end of the query\n"
    both = cli(capsys, "show", "orders", "--json", "--csv", "--spec", str(spec))
    assert both.returncode == 2 and "--json and --csv: give one" in both.stderr


def test_structs_arrays_and_timestamps_read_as_values_in_the_table_and_as_json_in_csv(tmp_path: Path) -> None:
    from deltaflow.cli.views import cell, csv_text

    layout = StorageLayout(str(tmp_path / "storage"))
    window = pa.struct([("start", pa.timestamp("us", "UTC")), ("end", pa.timestamp("us", "UTC"))])
    write_deltalake(layout.table("gold"), pa.table({
        "window": pa.array([{"start": datetime(2026, 12, 3, 14, tzinfo=UTC),
                             "end": datetime(2026, 12, 3, 15, tzinfo=UTC)}], window),
        "tags": pa.array([["a", None]], pa.list_(pa.string()))}))
    result = table_rows(layout, "gold")
    assert [cell(v) for v in result.rows[0]] == ["{start: 2026-12-03 14:00:00, end: 2026-12-03 15:00:00}",
                                                 "[a, null]"]
    lines = list(csv.reader(io.StringIO(csv_text(result))))
    hour = {"start": "2026-12-03T14:00:00+00:00", "end": "2026-12-03T15:00:00+00:00"}
    assert json.loads(lines[1][0]) == hour
    assert json.loads(lines[1][1]) == ["a", None]
