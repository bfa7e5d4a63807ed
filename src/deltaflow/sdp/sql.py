"""SQL definition files, as Spark Declarative Pipelines reads them: one dataset or flow per statement.

Understood statements (keywords in any case, ``;`` between statements)::

    CREATE [OR REFRESH] STREAMING TABLE name [(columns and constraints)] [table clauses] [AS query]
    CREATE [OR REFRESH] MATERIALIZED VIEW name [(columns and constraints)] [table clauses] AS query
    CREATE [OR REPLACE] TEMPORARY VIEW name [(columns)] [COMMENT '...'] AS query
    CREATE FLOW name [COMMENT '...'] AS INSERT INTO target BY NAME query
    CREATE FLOW name [COMMENT '...'] AS AUTO CDC INTO target FROM source KEYS (...) SEQUENCE BY ... [...]
    SET key = value

Table clauses: ``USING format``, ``PARTITIONED BY (cols)``, ``CLUSTER BY (cols)``, ``COMMENT '...'``,
``TBLPROPERTIES ('k' = 'v', ...)``. Constraints, among the columns, are those of declarative pipelines:
``CONSTRAINT name EXPECT (condition) [ON VIOLATION DROP ROW | ON VIOLATION FAIL UPDATE]``. The query is
kept as text, for Spark to parse when the flow runs (``STREAM(t)`` / ``STREAM t`` read ``t`` as a
stream); each definition knows the file line of its statement and of its query, so Spark's errors point
into the file. Parsing needs no Spark.

Examples:
    >>> [d.kind for d in parse_sql("CREATE MATERIALIZED VIEW v AS SELECT 1 AS x", "v.sql")]
    ['materialized_view']

"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from deltaflow.define.graph import AutoCdc
from deltaflow.errors import GraphError
from deltaflow.sdp.sql_cdc import auto_cdc_flow

SqlKind = Literal["table", "materialized_view", "temporary_view", "flow", "set"]
ConstraintAction = Literal["warn", "drop", "fail"]

_TOKEN = re.compile(r"""
    (?P<space>\s+) | (?P<comment>--[^\n]*|/\*.*?\*/) |
    (?P<string>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*") | (?P<quoted>`(?:[^`]|``)*`) |
    (?P<word>[A-Za-z_][A-Za-z0-9_]*) | (?P<number>\d+(?:\.\d*)?) | (?P<symbol>.)
""", re.VERBOSE | re.DOTALL)


@dataclass(frozen=True)
class Token:
    """One token: its kind, text, and offset in the file."""

    kind: str
    text: str
    start: int

    @property
    def word(self) -> str:
        """The upper-cased keyword (empty for anything but a bare word)."""
        return self.text.upper() if self.kind == "word" else ""

    @property
    def name(self) -> str:
        """The identifier it spells (a bare word, or a back-quoted name without its quotes)."""
        return self.text[1:-1].replace("``", "`") if self.kind == "quoted" else self.text


@dataclass(frozen=True)
class Constraint:
    """``CONSTRAINT name EXPECT (condition) [ON VIOLATION ...]``: an expectation on the dataset's rows."""

    name: str
    condition: str
    action: ConstraintAction


@dataclass(frozen=True)
class SqlDefinition:
    """One statement of a SQL definition file.

    Attributes:
        kind: What it defines (``set``: a Spark setting for the pipeline, ``name`` = ``query`` = value).
        name: The dataset's or flow's name (a dotted name keeps only its last part).
        line: The statement's first line in the file.
        query: The query text (``None`` for a streaming table that flows fill).
        query_line: The query's first line in the file.
        target: A flow's target table.

    """

    kind: SqlKind
    name: str
    line: int
    query: str | None = None
    query_line: int = 0
    target: str | None = None
    comment: str | None = None
    columns: str | None = None  # the declared schema, as DDL
    constraints: tuple[Constraint, ...] = ()
    partition_cols: tuple[str, ...] = ()
    cluster_by: tuple[str, ...] = ()
    table_properties: dict[str, str] = field(default_factory=dict)
    using: str | None = None
    cdc: AutoCdc | None = None  # an AUTO CDC flow's arguments (deltaflow.sdp.sql_cdc)
    source: str | None = None  # an AUTO CDC flow's source


def tokens(text: str) -> list[Token]:
    """The tokens of ``text``, without white space and comments."""
    found = []
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup or "symbol"
        if kind not in ("space", "comment"):
            found.append(Token(kind, match.group(), match.start()))
    return found


def statements(text: str) -> list[list[Token]]:
    """``text``'s statements (split at ``;`` outside parentheses), each as its tokens."""
    result: list[list[Token]] = [[]]
    depth = 0
    for token in tokens(text):
        depth += {"(": 1, ")": -1}.get(token.text, 0) if token.kind == "symbol" else 0
        if token.text == ";" and depth == 0:
            result.append([])
        else:
            result[-1].append(token)
    return [s for s in result if s]


def parse_sql(text: str, file: str) -> list[SqlDefinition]:
    """Every definition in SQL ``text`` read from ``file``.

    Raises:
        GraphError: A statement it does not understand, naming ``file`` and the line.

    """
    return [_Statement(text, file, s).parse() for s in statements(text)]


def line_of(text: str, offset: int) -> int:
    """The 1-based line of ``offset`` in ``text``."""
    return text.count("\n", 0, offset) + 1


class _Statement:
    def __init__(self, text: str, file: str, toks: list[Token]) -> None:
        self.text, self.file, self.toks, self.at = text, file, toks, 0

    # -- reading tokens ------------------------------------------------------------------------------------

    def error(self, message: str, token: Token | None = None) -> GraphError:
        where = token or (self.toks[self.at] if self.at < len(self.toks) else self.toks[-1])
        return GraphError(message, location=f"{self.file}:{line_of(self.text, where.start)}")

    def peek(self, *words: str) -> bool:
        ahead = self.toks[self.at:self.at + len(words)]
        return len(ahead) == len(words) and all(t.word == w for t, w in zip(ahead, words, strict=True))

    def take(self, *words: str) -> bool:
        if self.peek(*words):
            self.at += len(words)
            return True
        return False

    def expect(self, *words: str) -> None:
        if not self.take(*words):
            got = self.toks[self.at].text if self.at < len(self.toks) else "the end of the statement"
            raise self.error(f"expected {' '.join(words)}, found '{got}'")

    def name(self) -> str:
        if self.at >= len(self.toks) or self.toks[self.at].kind not in ("word", "quoted"):
            raise self.error("expected a name")
        parts = [self.toks[self.at].name]
        self.at += 1
        while self.at + 1 < len(self.toks) and self.toks[self.at].text == ".":
            parts.append(self.toks[self.at + 1].name)  # catalog.schema.name: the pipeline keeps the name
            self.at += 2
        return parts[-1]

    def string(self) -> str:
        token = self.toks[self.at] if self.at < len(self.toks) else None
        if token is None or token.kind != "string":
            raise self.error("expected a quoted string")
        self.at += 1
        quote = token.text[0]
        return token.text[1:-1].replace(quote * 2, quote).replace(f"\\{quote}", quote)

    def group(self) -> tuple[int, int]:
        """The text span inside the parenthesised group at the cursor, which is skipped."""
        if self.at >= len(self.toks) or self.toks[self.at].text != "(":
            raise self.error("expected '('")
        depth, first = 0, self.at
        for i in range(self.at, len(self.toks)):
            depth += {"(": 1, ")": -1}.get(self.toks[i].text, 0) if self.toks[i].kind == "symbol" else 0
            if depth == 0:
                self.at = i + 1
                return self.toks[first].start + 1, self.toks[i].start
        raise self.error("unclosed '('", self.toks[first])

    def names(self) -> tuple[str, ...]:
        begin, end = self.group()
        return tuple(t.name for t in tokens(self.text[begin:end]) if t.kind in ("word", "quoted"))

    def rest(self) -> tuple[str, int]:
        """The statement's remaining text (the query) and its first line."""
        if self.at >= len(self.toks):
            raise self.error("expected a query after AS")
        start, last = self.toks[self.at].start, self.toks[-1]
        return self.text[start:last.start + len(last.text)], line_of(self.text, start)

    # -- statements ----------------------------------------------------------------------------------------

    def parse(self) -> SqlDefinition:
        line = line_of(self.text, self.toks[0].start)
        if self.take("SET"):
            key_start = self.at
            while self.at < len(self.toks) and self.toks[self.at].text != "=":
                self.at += 1
            key = "".join(t.text for t in self.toks[key_start:self.at])
            self.expect_symbol("=")
            value, _ = self.rest()
            return SqlDefinition("set", key, line, query=value.strip().strip("'\""))
        self.expect("CREATE")
        self.take("OR", "REFRESH") or self.take("OR", "REPLACE")
        if self.take("STREAMING", "TABLE"):
            return self.dataset("table", line)
        if self.take("MATERIALIZED", "VIEW"):
            return self.dataset("materialized_view", line)
        if self.take("TEMPORARY", "VIEW") or self.take("TEMP", "VIEW"):
            return self.dataset("temporary_view", line)
        if self.take("FLOW"):
            return self.flow(line)
        raise self.error("expected STREAMING TABLE, MATERIALIZED VIEW, TEMPORARY VIEW or FLOW after CREATE")

    def expect_symbol(self, symbol: str) -> None:
        if self.at >= len(self.toks) or self.toks[self.at].text != symbol:
            raise self.error(f"expected '{symbol}'")
        self.at += 1

    def dataset(self, kind: SqlKind, line: int) -> SqlDefinition:
        self.take("IF", "NOT", "EXISTS")
        name = self.name()
        columns: str | None = None
        constraints: tuple[Constraint, ...] = ()
        if self.at < len(self.toks) and self.toks[self.at].text == "(":
            columns, constraints = self.columns()
        clauses: dict[str, object] = {}
        while self.at < len(self.toks) and not self.peek("AS"):
            clauses.update(self.clause())
        query, query_line = (None, 0)
        if self.take("AS"):
            query, query_line = self.rest()
        elif kind != "table":
            raise self.error(f"a {kind.replace('_', ' ')} needs AS <query>")
        return SqlDefinition(kind, name, line, query, query_line, columns=columns, constraints=constraints,
                             **clauses)  # type: ignore[arg-type]

    def clause(self) -> dict[str, object]:
        if self.take("USING"):
            return {"using": self.name()}
        if self.take("PARTITIONED", "BY"):
            return {"partition_cols": self.names()}
        if self.take("CLUSTER", "BY"):
            return {"cluster_by": self.names()}
        if self.take("COMMENT"):
            return {"comment": self.string()}
        if self.take("TBLPROPERTIES"):
            begin, end = self.group()
            inner = _Statement(self.text, self.file, tokens(self.text[begin:end]))
            inner.toks = [Token(t.kind, t.text, t.start + begin) for t in inner.toks]
            return {"table_properties": inner.properties()}
        raise self.error(f"unexpected '{self.toks[self.at].text}' (known: USING, PARTITIONED BY, CLUSTER BY, "
                         "COMMENT, TBLPROPERTIES, AS)")

    def properties(self) -> dict[str, str]:
        found = {}
        while self.at < len(self.toks):
            token = self.toks[self.at]
            key = self.string() if token.kind == "string" else self.dotted()
            self.expect_symbol("=")
            value = self.toks[self.at]
            found[key] = self.string() if value.kind == "string" else value.text
            if value.kind != "string":
                self.at += 1
            if self.at < len(self.toks):
                self.expect_symbol(",")
        return found

    def dotted(self) -> str:
        parts = [self.toks[self.at].name]
        self.at += 1
        while self.at + 1 < len(self.toks) and self.toks[self.at].text == ".":
            parts.append(self.toks[self.at + 1].name)
            self.at += 2
        return ".".join(parts)

    def columns(self) -> tuple[str | None, tuple[Constraint, ...]]:
        """``(col TYPE, ..., CONSTRAINT c EXPECT (cond) ...)``: the columns' DDL and the constraints."""
        begin, end = self.group()
        parts, constraints, depth, start = [], [], 0, begin
        inner = [Token(t.kind, t.text, t.start + begin) for t in tokens(self.text[begin:end])]
        for token in [*inner, Token("symbol", ",", end)]:
            depth += {"(": 1, ")": -1}.get(token.text, 0) if token.kind == "symbol" else 0
            if token.text == "," and depth == 0:
                piece = [t for t in inner if start <= t.start < token.start]
                if piece and piece[0].word == "CONSTRAINT":
                    constraints.append(self.constraint(piece))
                elif piece:
                    parts.append(self.text[piece[0].start:token.start].strip())
                start = token.start + 1
        return (", ".join(parts) or None), tuple(constraints)

    def constraint(self, piece: list[Token]) -> Constraint:
        inner = _Statement(self.text, self.file, piece)
        inner.expect("CONSTRAINT")
        name = inner.name()
        inner.expect("EXPECT")
        begin, end = inner.group()
        action: ConstraintAction = "warn"
        if inner.take("ON", "VIOLATION", "DROP", "ROW"):
            action = "drop"
        elif inner.take("ON", "VIOLATION", "FAIL", "UPDATE"):
            action = "fail"
        if inner.at < len(inner.toks):
            raise inner.error("expected ON VIOLATION DROP ROW or ON VIOLATION FAIL UPDATE")
        return Constraint(name, self.text[begin:end].strip(), action)

    def flow(self, line: int) -> SqlDefinition:
        name = self.name()
        comment = self.string() if self.take("COMMENT") else None
        if self.take("AS", "AUTO", "CDC", "INTO"):
            target, source, cdc = auto_cdc_flow(self)
            return SqlDefinition("flow", name, line, target=target, comment=comment, cdc=cdc, source=source)
        self.expect("AS", "INSERT", "INTO")
        target = self.name()
        self.expect("BY", "NAME")
        query, query_line = self.rest()
        return SqlDefinition("flow", name, line, query, query_line, target=target, comment=comment)
