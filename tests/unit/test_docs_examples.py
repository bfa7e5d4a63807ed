"""Every example on the guide pages is checked against the code (issue 42): a renamed verb, flag, spec key,
function or argument fails here. The tutorial's examples are run whole (``tests/integration/
test_tutorial.py``); the guides' are checked without Spark:

* each ``deltaflow ...`` command line of a ``bash`` block: its verb exists and each flag is one of its own;
* each ``yaml`` block: a valid ``deltaflow.yml`` (a fragment is completed with a name and a storage);
* each ``python`` block: it compiles, every ``dp.<name>`` and ``deltaflow.<module>.<name>`` it uses exists,
  and every keyword it passes to one is a parameter of it.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from deltaflow.errors import ConfigError
from deltaflow.spec import parse_spec

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md")
                                    if p.name not in ("tutorial.md", "report.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks(kind: str) -> list[tuple[str, str]]:
    return [(f"{page.name}#{i}", body) for page in PAGES
            for i, (lang, body) in enumerate(FENCE.findall(page.read_text())) if lang == kind]


def verbs() -> dict[str, Any]:
    import typer

    from deltaflow.cli.main import app

    found: dict[str, Any] = {}

    def walk(command: Any, path: str) -> None:
        found[path] = command
        for name, sub in (getattr(command, "commands", None) or {}).items():
            walk(sub, f"{path} {name}".strip())

    walk(typer.main.get_command(app), "")
    return found


def flags(command: Any) -> set[str]:
    return {o for p in command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")}


@pytest.mark.parametrize(("where", "body"), blocks("bash"))
def test_each_command_line_names_a_verb_and_flags_deltaflow_has(where: str, body: str) -> None:
    known = verbs()
    top = flags(known[""])
    for line in body.splitlines():
        words = line.split("#")[0].split()
        while words and "=" in words[0]:  # VAR=value deltaflow ...
            words.pop(0)
        if not words or words[0] != "deltaflow":
            continue
        words = [w for w in words[1:] if w not in top]
        if not words:
            continue  # deltaflow --version
        path = ""
        while words and f"{path} {words[0]}".strip() in known:
            path = f"{path} {words.pop(0)}".strip()
        assert path and path in known, f"{where}: no verb in {line!r}"
        own = flags(known[path]) | top
        for word in words:
            flag = word.strip("[]").split("=")[0]
            if flag.startswith("-") and flag != "...":
                assert flag in own, f"{where}: 'deltaflow {path}' has no flag {flag} ({line.strip()!r})"


@pytest.mark.parametrize(("where", "body"), blocks("yaml"))
def test_each_spec_example_is_a_valid_deltaflow_yml(where: str, body: str, tmp_path: Path) -> None:
    data = yaml.safe_load(body)
    full = {"name": "example", "storage": "data", **data}
    env = {var: "x" for var in re.findall(r"\$\{(\w+)", body)}
    try:
        parse_spec(yaml.safe_dump(full), tmp_path / "deltaflow.yml", env=env)
    except ConfigError as exc:
        pytest.fail(f"{where}: {exc}")


def called(tree: ast.AST) -> list[tuple[str, list[str]]]:
    """``(dotted name, keywords)`` of each call and reference of ``dp.x`` / ``deltaflow.m.x``."""
    found = []
    for node in ast.walk(tree):
        target = node.func if isinstance(node, ast.Call) else node
        keywords = [k.arg for k in node.keywords if k.arg] if isinstance(node, ast.Call) else []
        name = ast.unparse(target) if isinstance(target, ast.Attribute) else ""
        if name.startswith(("dp.", "deltaflow.")):
            found.append((name, keywords))
    return found


def resolve(name: str) -> Any:
    parts = name.split(".")
    obj: Any = importlib.import_module("deltaflow")
    for i, part in enumerate(parts[1:], start=1):
        if not hasattr(obj, part):
            obj = importlib.import_module(".".join(["deltaflow", *parts[1:i + 1]]))
        else:
            obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize(("where", "body"), blocks("python"))
def test_each_python_example_uses_names_and_arguments_deltaflow_has(where: str, body: str) -> None:
    tree = ast.parse(body, filename=where)
    imported = {alias.asname or alias.name: node.module for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("deltaflow")
                for alias in node.names}
    for name, module in imported.items():
        assert hasattr(importlib.import_module(module or "deltaflow"), name), f"{where}: {module}.{name}"
    for name, keywords in called(tree):
        try:
            obj = resolve(name)
        except (AttributeError, ModuleNotFoundError):
            pytest.fail(f"{where}: {name} does not exist")
        if keywords and callable(obj):
            parameters = inspect.signature(obj).parameters
            if not any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
                unknown = [k for k in keywords if k not in parameters]
                assert not unknown, f"{where}: {name}() has no parameter {', '.join(unknown)}"
