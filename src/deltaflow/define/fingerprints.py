"""Per-dataset fingerprints of the definitions: a digest of what builds each dataset, computed without Spark.

A dataset's fingerprint is a sha256 over:

* its declaration: kind, comment, partition columns, table properties, schema, ``by_window`` refresh,
  ``merge_schema``, a sink's handler;
* for each flow into it: its name, options, auto CDC settings, expectations (quarantine included), and
  its function: a SQL flow's query (whitespace outside quotes collapsed); a Python function's source text
  as Python tokens (so comments, blank lines and spacing do not count; the code object's bytecode and
  constants when there is no source), the values of the module globals its code names (``co_names``, in
  nested code too) and of its closure: constants by ``repr``, containers item by item, functions of the
  project (files under the spec's folder) by their own fingerprint (cycle-safe), other functions, classes
  and modules by their qualified name, any other object by its ``repr`` without memory addresses;
* the spec values it reads: each ``configuration`` parameter whose name is a string constant of its code
  (``dp.parameter("landing")``, ``spark.conf.get("landing")``, in helpers it calls too) or a word of its
  SQL, with the parameter's value;
* the fingerprint of each temporary view it names the same way (a view is inlined into its readers).

Nothing machine-bound goes in (no paths, object ids, definition lines, dict order or hash seed), so the
same definitions give the same fingerprints in every run and on every machine, and moving a definition
within its file changes nothing. Functions of deltaflow, pyspark and other installed packages count by
name only: upgrading them does not count as a change of every definition.

Examples:
    >>> from deltaflow.define.graph import PipelineGraph
    >>> dataset_fingerprints(PipelineGraph(), ".", {})
    {}

"""

from __future__ import annotations

import ast
import dataclasses
import enum
import functools
import hashlib
import inspect
import io
import json
import os
import re
import textwrap
import tokenize
import types
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deltaflow.define.expectations import expectations_of

if TYPE_CHECKING:
    from deltaflow.define.graph import PipelineGraph

#: The attribute holding a SQL flow's query on its function (set by :mod:`deltaflow.sdp.sql_flows`).
SQL_ATTRIBUTE = "__deltaflow_sql__"
_ADDRESS = re.compile(r" at 0x[0-9A-Fa-f]+")
_SQL_TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`|\s+|[^\s'\"`]+|.", re.S)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MAX_DEPTH = 12
_INSTALLED = ("site-packages", "dist-packages")
_OWN = Path(__file__).resolve().parent  # deltaflow's own package


def dataset_fingerprints(graph: PipelineGraph, root: str | Path,
                         parameters: Mapping[str, str]) -> dict[str, str]:
    """Each dataset's fingerprint (hex sha256), by name.

    Args:
        graph: The loaded definitions.
        root: The project's folder: functions defined in files under it are fingerprinted by their code.
        parameters: The spec's ``configuration`` parameters (``Spec.parameters``).

    Examples:
        >>> dataset_fingerprints(graph, spec.root, spec.parameters)  # doctest: +SKIP
        {'bronze_events': '9f2c...', 'silver_events': '41d0...', 'gold_actions': 'c77e...'}

    """
    fingerprinter = _Fingerprinter(graph, Path(root), parameters)
    return {name: fingerprinter.dataset(name) for name in sorted(graph.datasets)}


def normalized_sql(query: str) -> str:
    r"""``query`` with each run of whitespace outside quotes made one space, and none at either end.

    Examples:
        >>> normalized_sql("SELECT  a,\\n   'x  y' FROM t ")
        "SELECT a, 'x  y' FROM t"

    """
    return "".join(" " if token.isspace() else token for token in _SQL_TOKEN.findall(query)).strip()


def normalized_python(source: str) -> str:
    """Python ``source`` as its tokens: comments, blank lines and spacing within a line do not count.

    Examples:
        >>> normalized_python("x = 1  # one") == normalized_python("x=1")
        True

    """
    text = textwrap.dedent(source)
    kept: list[str] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type in (tokenize.COMMENT, tokenize.NL, tokenize.ENDMARKER):
                continue
            kept.append({tokenize.NEWLINE: "\n", tokenize.INDENT: "<indent>",
                         tokenize.DEDENT: "<dedent>"}.get(token.type, token.string))
    except (tokenize.TokenError, SyntaxError):  # a lambda cut out of its line, say: the text as it is
        return text
    return " ".join(kept)


class _Fingerprinter:
    """One pass over a graph: functions and views fingerprinted once each, cycles cut."""

    def __init__(self, graph: PipelineGraph, root: Path, parameters: Mapping[str, str]) -> None:
        self.graph = graph
        self.root = root.resolve()
        self.parameters = parameters
        self._functions: dict[int, tuple[object, str]] = {}  # id -> (the object, kept alive; its digest)
        self._datasets: dict[str, str] = {}
        self._active: set[object] = set()

    # -- datasets -------------------------------------------------------------------------------------

    def dataset(self, name: str) -> str:
        if name in self._datasets:
            return self._datasets[name]
        if name in self._active:
            return f"cycle:{name}"
        self._active.add(name)
        try:
            digest = self._dataset(name)
        except Exception as exc:  # never a reason not to load: a stable stand-in (changes go unseen)
            digest = hashlib.sha256(f"unfingerprinted:{name}:{type(exc).__name__}".encode()).hexdigest()
        finally:
            self._active.discard(name)
        self._datasets[name] = digest
        return digest

    def _dataset(self, name: str) -> str:
        dataset = self.graph.datasets[name]
        schema = dataset.schema if dataset.schema is None or isinstance(dataset.schema, str) else \
            _safe(dataset.schema.json)
        parts: list[Any] = [
            ["kind", dataset.kind], ["comment", dataset.comment],
            ["partition_cols", list(dataset.partition_cols)],
            ["schema", schema],  # (table properties are set in place: deltaflow.properties)
            ["refresh", self.value(dataset.refresh)], ["merge_schema", dataset.merge_schema],
            ["handler", self.value(dataset.handler)],
        ]
        words: set[str] = set()
        for flow in self.graph.flows_into(name):
            parts.append(["flow", flow.name, self.value(dict(flow.options)), self.value(flow.cdc),
                          self.value(expectations_of(flow.func)), self.function(flow.func)])
            words |= self.words(flow.func)
        if dataset.handler is not None:
            words |= self.words(dataset.handler)
        parts += [["parameter", key, self.parameters[key]] for key in sorted(words & set(self.parameters))]
        parts += [["view", view, self.dataset(view)] for view in sorted(words)
                  if view != name and view in self.graph.datasets
                  and self.graph.datasets[view].kind == "temporary_view"]
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()

    # -- functions ------------------------------------------------------------------------------------

    def function(self, func: Callable[..., Any]) -> str:
        """The digest of a function of the project; a function from elsewhere: its name and closure."""
        key = id(func)
        if key in self._functions:
            return self._functions[key][1]
        if func in self._active:
            return f"cycle:{getattr(func, '__qualname__', '?')}"
        self._active.add(func)
        try:
            digest = hashlib.sha256(json.dumps(self._function(func)).encode()).hexdigest()
        finally:
            self._active.discard(func)
        self._functions[key] = (func, digest)
        return digest

    def _function(self, func: Any) -> list[Any]:
        if isinstance(func, functools.partial):
            return ["partial", self.value(func.func), self.value(func.args), self.value(func.keywords)]
        sql = func.__dict__.get(SQL_ATTRIBUTE) if isinstance(func, types.FunctionType) else None
        if isinstance(sql, str):
            return ["sql", normalized_sql(sql)]
        code = getattr(func, "__code__", None)
        if not isinstance(code, types.CodeType):
            return ["callable", _qualified(func)]
        closure = [[n, self.value(c.cell_contents)] for n, c in
                   zip(code.co_freevars, func.__closure__ or (), strict=False) if _filled(c)]
        if not self.ours(code):
            return ["function", _qualified(func), closure]
        names = sorted({n for c in _codes(code) for n in c.co_names})
        globs = func.__globals__
        referenced = [[n, self.value(globs[n])] for n in names if n in globs]
        defaults = [self.value(func.__defaults__), self.value(func.__kwdefaults__)]
        return ["function", _source(func), referenced, closure, defaults]

    def ours(self, code: types.CodeType) -> bool:
        """Whether ``code`` was defined in a file of the project (not deltaflow's, nor an installed one)."""
        try:
            path = Path(os.path.abspath(code.co_filename))
        except (OSError, ValueError):
            return False
        if any(part in _INSTALLED for part in path.parts) or path.is_relative_to(_OWN):
            return False
        return path.is_relative_to(self.root)

    def words(self, func: Any, seen: set[int] | None = None) -> set[str]:
        """The string constants of ``func``'s code and of the project's functions it reaches; SQL's words."""
        seen = set() if seen is None else seen
        if id(func) in seen:
            return set()
        seen.add(id(func))
        if isinstance(func, functools.partial):
            return self.words(func.func, seen)
        sql = func.__dict__.get(SQL_ATTRIBUTE) if isinstance(func, types.FunctionType) else None
        if isinstance(sql, str):
            return set(_WORD.findall(sql))
        code = getattr(func, "__code__", None)
        if not isinstance(code, types.CodeType):
            return set()
        found = {s for c in _codes(code) for s in _strings(c.co_consts)}
        cells = [c.cell_contents for c in func.__closure__ or () if _filled(c)]
        found |= {v for v in cells if isinstance(v, str)}
        if self.ours(code):
            globs = func.__globals__
            reached = [globs[n] for c in _codes(code) for n in c.co_names if n in globs] + cells
            for value in reached:
                if isinstance(value, types.FunctionType | functools.partial):
                    found |= self.words(value, seen)
                elif isinstance(value, str):
                    found.add(value)
        return found

    # -- values ---------------------------------------------------------------------------------------

    def value(self, value: Any, depth: int = 0) -> Any:
        """A JSON-able, stable stand-in for ``value`` (see the module's rules)."""
        try:
            return self._value(value, depth)
        except Exception:  # an object that will not be looked at: its type stands for it
            return [_qualified(type(value)), "?"]

    def _value(self, value: Any, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            return "..."
        if value is None or isinstance(value, bool | int | float | str | bytes | complex | enum.Enum):
            return repr(value)
        if isinstance(value, list | tuple):
            return [type(value).__name__, [self.value(v, depth + 1) for v in value]]
        if isinstance(value, set | frozenset):
            return ["set", sorted(json.dumps(self.value(v, depth + 1)) for v in value)]
        if isinstance(value, Mapping):
            items = [[json.dumps(self.value(k, depth + 1)), self.value(v, depth + 1)]
                     for k, v in value.items()]
            return ["dict", sorted(items, key=lambda item: item[0])]
        if isinstance(value, types.FunctionType | functools.partial):
            return ["function", self.function(value)]
        if isinstance(value, types.ModuleType):
            return ["module", value.__name__]
        if isinstance(value, type):
            source = _safe(lambda: normalized_python(inspect.getsource(value))) \
                if self.ours_object(value) else None
            return ["class", _qualified(value), source]
        if isinstance(value, types.BuiltinFunctionType | types.MethodType | types.BuiltinMethodType):
            return ["callable", _qualified(value)]
        if dataclasses.is_dataclass(value):
            return [_qualified(type(value)), [[f.name, self.value(getattr(value, f.name), depth + 1)]
                                             for f in dataclasses.fields(value)]]
        if isinstance(value, os.PathLike):
            path = Path(os.fspath(value))
            inside = path.is_absolute() and path.resolve().is_relative_to(self.root)
            return ["path", str(path.resolve().relative_to(self.root)) if inside else str(path)]
        text = _safe(lambda: repr(value))
        return [_qualified(type(value)), None if text is None else _ADDRESS.sub("", text)]

    def ours_object(self, value: type) -> bool:
        module = _safe(lambda: inspect.getsourcefile(value))
        return module is not None and not any(p in _INSTALLED for p in Path(module).parts) and \
            Path(os.path.abspath(module)).is_relative_to(self.root)


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    """``code`` and every code object nested in it (lambdas, comprehensions, inner functions)."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _strings(consts: tuple[Any, ...]) -> Iterator[str]:
    for const in consts:
        if isinstance(const, str):
            yield const
        elif isinstance(const, tuple | frozenset):
            yield from _strings(tuple(const))


def _source(func: types.FunctionType) -> Any:
    """The function's source as tokens; without source, its bytecode and constants, nested code too.

    Its decorators are left out: what they declare counts through the dataset's and flow's own fields,
    and a table property is set on the table in place (:mod:`deltaflow.properties`), not rebuilt.
    """
    try:
        source = textwrap.dedent(inspect.getsource(func))
    except (OSError, TypeError):
        return _bytecode(func.__code__)
    try:
        node = ast.parse(source).body[0]
        source = "\n".join(source.splitlines()[node.lineno - 1:])
    except (SyntaxError, IndexError):  # a lambda's line: as it is
        pass
    return normalized_python(source)


def _bytecode(code: types.CodeType) -> Any:
    consts: list[Any] = []
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            consts.append(_bytecode(const))
        elif isinstance(const, frozenset):
            consts.append(sorted(repr(c) for c in const))
        else:
            consts.append(repr(const))
    return ["bytecode", code.co_code.hex(), consts, list(code.co_names)]


def _qualified(value: Any) -> str:
    module = getattr(value, "__module__", None) or ""
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None) or type(value).__name__
    return f"{module}.{name}" if module else str(name)


def _filled(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def _safe(compute: Callable[[], Any]) -> Any:
    try:
        return compute()
    except Exception:
        return None
