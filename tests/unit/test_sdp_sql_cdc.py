"""``CREATE FLOW ... AS AUTO CDC INTO ...`` read without Spark: its clauses, and a one-line error for each
thing it cannot read."""

from __future__ import annotations

import re

import pytest

from deltaflow.errors import GraphError
from deltaflow.sdp.sql import parse_sql


def test_every_clause_becomes_the_argument_of_its_name() -> None:
    flow = parse_sql("CREATE STREAMING TABLE t;\nCREATE FLOW f COMMENT 'x' AS AUTO CDC INTO t FROM STREAM(s) "
                     "KEYS (id, region) IGNORE NULL UPDATES APPLY AS DELETE WHEN op = 'D' AND (n > 1) "
                     "SEQUENCE BY STRUCT(ts, seq) COLUMNS * EXCEPT (op) STORED AS SCD TYPE 2 "
                     "TRACK HISTORY ON name, tier", "f.sql")[1]
    assert (flow.kind, flow.name, flow.target, flow.source, flow.comment) == ("flow", "f", "t", "s", "x")
    cdc = flow.cdc
    assert cdc is not None
    assert (cdc.keys, cdc.sequence_by, cdc.apply_as_deletes) == (("id", "region"), ("ts", "seq"),
                                                                   "op = 'D' AND (n > 1)")
    assert (cdc.except_column_list, cdc.column_list) == (("op",), None)
    assert (cdc.scd_type, cdc.track_history_column_list) == (2, ("name", "tier")) and cdc.ignore_null_updates
    listed = parse_sql("CREATE FLOW g AS AUTO CDC INTO t FROM s KEYS (id) SEQUENCE BY ts COLUMNS id, name "
                       "APPLY AS TRUNCATE WHEN op = 'T'", "g.sql")[0].cdc
    assert listed is not None
    assert (listed.column_list, listed.apply_as_truncates) == (("id", "name"), "op = 'T'")


@pytest.mark.parametrize(("sql", "message"), [
    ("CREATE FLOW f AS AUTO CDC INTO t KEYS (id) SEQUENCE BY ts", "AUTO CDC INTO t: FROM missing"),
    ("CREATE FLOW f AS AUTO CDC INTO t FROM s KEYS (id) KEYS (x) SEQUENCE BY ts", "KEYS given twice"),
    ("CREATE FLOW f AS AUTO CDC INTO t FROM s KEYS (id) SEQUENCE BY ts STORED AS SCD TYPE 3",
     "STORED AS SCD TYPE 1 or 2, not '3'"),
    ("CREATE FLOW f AS AUTO CDC INTO t FROM s KEYS (id) SEQUENCE BY ts TRACK HISTORY ON * EXCEPT (a)",
     "TRACK HISTORY ON * EXCEPT (...) is not supported"),
    ("CREATE FLOW f AS AUTO CDC INTO t FROM s KEYS (id) SEQUENCE BY ts ORDER BY x", "unexpected 'ORDER'"),
])
def test_an_auto_cdc_statement_it_cannot_read_is_one_line_at_its_line(sql: str, message: str) -> None:
    with pytest.raises(GraphError, match=r"^DF-GRAPH cdc\.sql:3: .*" + re.escape(message)):
        parse_sql(f"CREATE STREAMING TABLE t;\n\n{sql}", "cdc.sql")
