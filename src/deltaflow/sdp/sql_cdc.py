"""``CREATE FLOW name AS AUTO CDC INTO target ...``: SDP's SQL form of an auto CDC flow.

After ``AUTO CDC INTO target`` come its clauses, in any order::

    FROM source | FROM STREAM(source) | FROM STREAM source
    KEYS (k1, k2)
    SEQUENCE BY column | SEQUENCE BY STRUCT(c1, c2)
    [IGNORE NULL UPDATES]
    [APPLY AS DELETE WHEN condition]
    [APPLY AS TRUNCATE WHEN condition]
    [COLUMNS c1, c2 | COLUMNS * EXCEPT (c1, c2)]
    [STORED AS SCD TYPE 1 | STORED AS SCD TYPE 2]
    [TRACK HISTORY ON c1, c2 | TRACK HISTORY ON (c1, c2)]

Each becomes the argument of the same name of :func:`deltaflow.create_auto_cdc_flow`.

Examples:
    >>> [d.cdc.keys for d in parse_sql("CREATE FLOW f AS AUTO CDC INTO t FROM STREAM(s) KEYS (id) "
    ...                                "SEQUENCE BY ts", "f.sql")]  # doctest: +SKIP
    [('id',)]

"""

from __future__ import annotations

from typing import Any, Protocol

from deltaflow.define.graph import AutoCdc
from deltaflow.errors import GraphError


class Statement(Protocol):
    """The reader of one SQL statement (``deltaflow.sdp.sql``'s), which :func:`auto_cdc_flow` reads on."""

    text: str
    toks: list[Any]
    at: int

    def error(self, message: str, token: Any = None) -> GraphError: ...  # noqa: D102
    def take(self, *words: str) -> bool: ...  # noqa: D102
    def expect(self, *words: str) -> None: ...  # noqa: D102
    def name(self) -> str: ...  # noqa: D102
    def names(self) -> tuple[str, ...]: ...  # noqa: D102
    def group(self) -> tuple[int, int]: ...  # noqa: D102

#: The words that open a clause (a condition or a list runs until the next of them).
_CLAUSES = {"FROM", "KEYS", "SEQUENCE", "IGNORE", "APPLY", "COLUMNS", "STORED", "TRACK"}


def auto_cdc_flow(statement: Statement) -> tuple[str, str, AutoCdc]:
    """The target, source and arguments of the flow the rest of ``statement`` (after AUTO CDC INTO) declares.

    Raises:
        GraphError: A clause it does not know, a missing ``FROM``, ``KEYS`` or ``SEQUENCE BY``, or a
            clause given twice, at the statement's file and line.

    """
    target = statement.name()
    seen: set[str] = set()
    source: str | None = None
    keys: tuple[str, ...] = ()
    sequence: tuple[str, ...] = ()
    deletes = truncates = None
    excluded, columns, tracked = False, None, None
    scd_type, ignore_nulls = 1, False

    def once(clause: str) -> None:
        if clause in seen:
            raise statement.error(f"AUTO CDC INTO {target}: {clause} given twice")
        seen.add(clause)

    while statement.at < len(statement.toks):
        if statement.take("FROM"):
            once("FROM")
            if statement.take("STREAM") and statement.toks[statement.at].text == "(":
                begin, end = statement.group()
                source = statement.text[begin:end].strip().split(".")[-1].strip("`")
            else:
                source = statement.name()
        elif statement.take("KEYS"):
            once("KEYS")
            keys = statement.names()
        elif statement.take("SEQUENCE", "BY"):
            once("SEQUENCE BY")
            sequence = statement.names() if statement.take("STRUCT") else (statement.name(),)
        elif statement.take("IGNORE", "NULL", "UPDATES"):
            once("IGNORE NULL UPDATES")
            ignore_nulls = True
        elif statement.take("APPLY", "AS", "DELETE", "WHEN"):
            once("APPLY AS DELETE WHEN")
            deletes = _until_clause(statement)
        elif statement.take("APPLY", "AS", "TRUNCATE", "WHEN"):
            once("APPLY AS TRUNCATE WHEN")
            truncates = _until_clause(statement)
        elif statement.take("COLUMNS"):
            once("COLUMNS")
            excluded, columns = _column_choice(statement)
        elif statement.take("STORED", "AS", "SCD", "TYPE"):
            once("STORED AS")
            kind = statement.toks[statement.at].text if statement.at < len(statement.toks) else ""
            if kind not in ("1", "2"):
                raise statement.error(f"AUTO CDC INTO {target}: STORED AS SCD TYPE 1 or 2, not '{kind}'")
            statement.at += 1
            scd_type = int(kind)
        elif statement.take("TRACK", "HISTORY", "ON"):
            once("TRACK HISTORY ON")
            all_but, tracked = _column_choice(statement)
            if all_but:
                raise statement.error(f"AUTO CDC INTO {target}: TRACK HISTORY ON * EXCEPT (...) is not "
                                      "supported; list the columns whose change starts a new version")
        else:
            got = statement.toks[statement.at].text
            raise statement.error(f"AUTO CDC INTO {target}: unexpected '{got}' (expected FROM, KEYS, "
                                  "SEQUENCE BY, IGNORE NULL UPDATES, APPLY AS DELETE/TRUNCATE WHEN, COLUMNS, "
                                  "STORED AS SCD TYPE or TRACK HISTORY ON)")
    missing = [clause for clause in ("FROM", "KEYS", "SEQUENCE BY") if clause not in seen]
    if source is None or missing:
        raise statement.error(f"AUTO CDC INTO {target}: {', '.join(missing)} missing", statement.toks[0])
    if scd_type == 2 and truncates is not None:
        raise statement.error(f"AUTO CDC INTO {target}: APPLY AS TRUNCATE works with SCD TYPE 1 only")
    cdc = AutoCdc(keys=keys, sequence_by=sequence, apply_as_deletes=deletes, apply_as_truncates=truncates,
                  column_list=None if excluded else columns, except_column_list=columns if excluded else None,
                  scd_type=2 if scd_type == 2 else 1, track_history_column_list=tracked,
                  ignore_null_updates=ignore_nulls)
    return target, source, cdc


def _until_clause(statement: Statement) -> str:
    """The text from the cursor to the next clause word outside parentheses (a condition)."""
    first, depth = statement.at, 0
    while statement.at < len(statement.toks):
        token = statement.toks[statement.at]
        if depth == 0 and token.word in _CLAUSES and statement.at > first:
            break
        depth += {"(": 1, ")": -1}.get(token.text, 0) if token.kind == "symbol" else 0
        statement.at += 1
    if statement.at == first:
        raise statement.error("expected a condition")
    last = statement.toks[statement.at - 1]
    return statement.text[statement.toks[first].start:last.start + len(last.text)].strip()


def _column_choice(statement: Statement) -> tuple[bool, tuple[str, ...]]:
    """``* EXCEPT (a, b)`` (True and the names left out), ``(a, b)`` or ``a, b`` (False and the names)."""
    if statement.at < len(statement.toks) and statement.toks[statement.at].text == "*":
        statement.at += 1
        statement.expect("EXCEPT")
        return True, statement.names()
    if statement.at < len(statement.toks) and statement.toks[statement.at].text == "(":
        return False, statement.names()
    names = [statement.name()]
    while statement.at < len(statement.toks) and statement.toks[statement.at].text == ",":
        statement.at += 1
        names.append(statement.name())
    return False, tuple(names)
