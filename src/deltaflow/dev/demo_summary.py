"""The end of ``deltaflow demo``: every table's rows, the showcase's top rows, and how to look further.

Read with ``deltalake`` (no JVM).

Examples:
    >>> summary(layout, ["bronze_orders"], showcase, console, Path("examples/orders"))  # doctest: +SKIP

"""

from __future__ import annotations

import shlex
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from deltaflow.dev.demo import Showcase
    from deltaflow.storage import StorageLayout

TOP_ROWS = 10


def summary(layout: StorageLayout, datasets: list[str], showcase: Showcase, console: Console,
            spec: Path, stops_broker: bool = False, database: str | None = None) -> None:
    """Print each table's rows, the showcase's top rows, and the commands that look at what ran.

    ``database``: where the run registered the tables by name (None: nowhere). ``stops_broker``: the demo
    stops the Kafka broker it started, so it says how to bring it back (the backlog ``status`` measures
    now asks it).
    """
    from deltalake import DeltaTable

    console.print("")
    for name in datasets:
        path = layout.table(name)
        try:
            rows = DeltaTable(path).to_pyarrow_dataset().count_rows()
        except Exception:  # the run failed before creating it
            console.print(f"{name}: no table at {path}", markup=False, soft_wrap=True)
            continue
        console.print(f"{name}: {rows:,} rows in {path}", markup=False, soft_wrap=True)
    top = layout.table(showcase.table)
    try:
        console.print(top_rows(top, showcase))
    except Exception as exc:  # a summary must not hide the run's own outcome
        console.print(f"{showcase.table}: cannot read the top rows: {exc}", markup=False)
    where = f"DELTAFLOW_STORAGE={shlex.quote(layout.root)} deltaflow"
    flag = f"--spec {shlex.quote(str(spec))}"
    lines = ["", "Look at what ran (no Spark needed):",
             f"  {where} status {flag}    # each flow: state, rates, backlog now",
             f"  {where} ui {flag}    # the dashboard, in a browser",
             f"  {where} history {showcase.table} {flag}    # its versions and the batches behind them",
             f"  {where} show {showcase.table} {flag}    # its rows (--where, --json, --csv)",
             f"or with Spark: spark.read.format('delta').load('{top}').show()"]
    if database is not None:
        lines.append(f"  (or by name between runs, spark.table('{database}.{showcase.table}'), with Hive "
                     f"support on the embedded metastore in {layout.metastore})")
    if stops_broker:
        lines.append("The demo stops its Kafka broker; 'deltaflow kafka start' brings it back with its "
                     "topics, so that status can measure each flow's backlog now.")
    console.print("\n".join(lines), markup=False, soft_wrap=True)


def top_rows(path: str, showcase: Showcase, limit: int = TOP_ROWS) -> Table:
    """The first ``limit`` rows of the Delta table at ``path`` by ``showcase.order_by``, descending.

    Read with ``deltalake`` (no JVM); a window column shows as its start and end.

    Examples:
        >>> console.print(top_rows("deltaflow_demo/tables/gold_daily_sales",
        ...                        DEMOS["orders"].showcase))  # doctest: +SKIP

    """
    from deltalake import DeltaTable

    data = DeltaTable(path).to_pyarrow_table(columns=list(showcase.columns))
    data = data.sort_by([(showcase.order_by, "descending")]).slice(0, limit)
    table = Table(title=showcase.title, title_justify="left")
    numeric = {name for name in showcase.columns if str(data.schema.field(name).type).startswith(
        ("int", "uint", "double", "float", "decimal"))}
    for name in showcase.columns:
        table.add_column(name, justify="right" if name in numeric else "left")
    for row in data.to_pylist():
        table.add_row(*(_cell(row[name]) for name in showcase.columns))
    return table


def _cell(value: Any) -> str:
    """A value as table text: windows as their span, numbers with separators, times to the second."""
    if value is None:
        return "-"
    if isinstance(value, dict) and {"start", "end"} <= value.keys():
        start, end = value["start"], value["end"]
        if (end - start).total_seconds() % 86_400 == 0 and start.time() == datetime.min.time():
            return f"{start:%Y-%m-%d}"
        return f"{start:%Y-%m-%d %H:%M}-{end:%H:%M}"
    if isinstance(value, datetime):
        return f"{value:%Y-%m-%d %H:%M:%S}"
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
