"""The documentation's reference pages, generated from the code (never written twice).

``mkdocs build`` runs this script through mkdocs-gen-files (``mkdocs.yml``): every CLI verb and flag from
the Typer app, every ``deltaflow.yml`` key from the pydantic model, every error code from
``deltaflow.errors``, every Prometheus metric from ``deltaflow.ui.metrics``; the Python API page hands
``deltaflow``'s public names to mkdocstrings. ``tests/unit/test_docs.py`` checks the same lists, so a flag,
a key, an error or a metric without its text fails the tests.

    python tools/docs_reference.py      # print the pages instead (what the site shows)
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

PAGES = ("cli", "spec", "api", "errors", "metrics")


def cli_commands() -> Iterator[tuple[str, Any]]:
    """``(verb path, click command)`` for every verb of ``deltaflow``, sub-verbs included."""
    import typer

    from deltaflow.cli.main import app

    def walk(command: Any, path: str) -> Iterator[tuple[str, Any]]:
        subs = getattr(command, "commands", None)
        if subs:
            for name, sub in sorted(subs.items()):
                yield from walk(sub, f"{path} {name}")
        else:
            yield path, command

    yield from walk(typer.main.get_command(app), "deltaflow")


def _cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def cli_page() -> str:
    """Every verb: what it does, and each argument and flag with its default."""
    lines = ["# Command line", "", "Generated from the command line itself (`deltaflow --help` shows the "
             "same). Exit codes: 0 done; 1 the pipeline or its input is wrong (one line), or a flow failed; "
             "2 the command line is wrong (one line, before Spark starts; `DF-USAGE` for an argument that "
             "does not fit the pipeline); 130 interrupted.", ""]
    for path, command in cli_commands():
        lines += [f"## `{path}`", "", _cell(command.help or ""), "",
                  "| argument or flag | default | what |", "|---|---|---|"]
        for param in command.params:
            if param.name == "help" or getattr(param, "hidden", False):  # hidden: part of another's syntax
                continue
            names = ", ".join(f"`{o}`" for o in (*param.opts, *param.secondary_opts))
            if param.param_type_name == "argument":
                names = f"`{param.name.upper()}`"
            default = ("" if param.default is None or param.default is False or param.default == () or
                       param.required else f"`{param.default}`")
            lines.append(f"| {names} | {default} | {_cell(param.help or '')} |")
        lines.append("")
    return "\n".join(lines)


def spec_keys() -> Iterator[tuple[str, Any, Any]]:
    """``(dotted key, field, model)`` for every key of ``deltaflow.yml``, nested sections included."""
    from pydantic import BaseModel

    from deltaflow.spec import Spec

    def walk(model: type[BaseModel], prefix: str) -> Iterator[tuple[str, Any, Any]]:
        for name, field in model.model_fields.items():
            yield f"{prefix}{name}", field, model
            nested = _model_of(field.annotation)
            if nested is not None:  # a section, or a mapping of them (trigger.flows.<flow>)
                each = ".<name>." if getattr(field.annotation, "__origin__", None) is dict else "."
                yield from walk(nested, f"{prefix}{name}{each}")

    yield from walk(Spec, "")


def _model_of(annotation: Any) -> Any:
    from pydantic import BaseModel

    for candidate in (annotation, *getattr(annotation, "__args__", ())):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _type_name(annotation: Any) -> str:
    """A key's type as a YAML author reads it: ``text``, ``list of text``, ``one of: a, b``, ``(optional)``.
    """
    import types
    import typing

    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        kept = [a for a in args if a is not type(None)]
        inner = " or ".join(_type_name(a) for a in kept)
        return f"{inner} (optional)" if len(kept) < len(args) else inner
    if origin is typing.Literal:
        return "one of: " + ", ".join(str(a) for a in args)
    if origin is list:
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return f"mapping of {_type_name(args[0])} to {_type_name(args[1])}"
    if _model_of(annotation) is not None:
        return "section"
    words = {str: "text", int: "integer", float: "number", bool: "true or false"}
    return words.get(annotation, str(annotation))


def _yaml(value: Any) -> str:
    """``value`` as it is written in ``deltaflow.yml`` (flow style, one line)."""
    import yaml

    return str(yaml.safe_dump(value, default_flow_style=True, width=10_000, sort_keys=False)).strip() \
        .removesuffix("\n...").removesuffix("...").strip()


def spec_page() -> str:
    """Every key of ``deltaflow.yml``: its type, default, meaning and an example, as YAML."""
    from pydantic_core import PydanticUndefined

    lines = ["# deltaflow.yml", "", "Generated from the spec's model. `deltaflow schema` prints the same as "
             "[a JSON Schema](deltaflow.schema.json), which editors use to complete and check a spec "
             "(`deltaflow init` writes the line that points them to it). Defaults and examples are written "
             "as in the file; a nested key's dotted name is its place under its section "
             "(`kafka.bootstrap_servers` is `bootstrap_servers:` under `kafka:`).", "",
             "| key | type | default | what | example |",
             "|---|---|---|---|---|"]
    for key, field, _ in spec_keys():
        if _model_of(field.annotation) is not None and key not in ("s3",):
            default = "(section)"
        elif field.default_factory is not None:
            default = f"`{_yaml(field.default_factory())}`"
        elif field.default is PydanticUndefined:
            default = "required"
        elif field.default is None:
            default = "(not set)"
        else:
            default = f"`{_yaml(field.default)}`"
        example = f"`{key.split('.')[-1]}: {_yaml(field.examples[0])}`" if field.examples else ""
        lines.append(f"| `{key}` | {_cell(_type_name(field.annotation))} | {_cell(default)} | "
                     f"{_cell(field.description or '')} | {_cell(example)} |")
    lines += ["", "A string value may hold `${VAR}` or `${VAR:-default}`: the environment's value, never "
              "printed.", ""]
    return "\n".join(lines)


def api_page() -> str:
    """The Python API: ``deltaflow``'s public names, from their docstrings (mkdocstrings)."""
    import deltaflow

    names = sorted(n for n in deltaflow.__all__ if not n.startswith("_") and n[0].islower())
    lines = ["# Python API", "", "What a definition file uses, as `import deltaflow as dp`; each entry from "
             "its docstring.", ""]
    lines += [f"::: deltaflow.{name}\n" for name in names]
    lines += ["## The facade", "", "Every verb, the demo, the tests and the benchmarks assemble a pipeline "
              "here.", "", "::: deltaflow.pipeline.Pipeline", ""]
    return "\n".join(lines)


def error_classes() -> list[Any]:
    """Every error deltaflow raises on purpose, the root first."""
    from deltaflow import errors

    return [cls for _, cls in inspect.getmembers(errors, inspect.isclass)
            if issubclass(cls, errors.DeltaflowError) and cls.__module__ == errors.__name__]


def errors_page() -> str:
    """Every error code: what it means, and the usual fix."""
    lines = ["# Error codes", "", "Every error is one line: its code, where (file and line, spec field, "
             "flow, address), what is wrong, and what to do: `error: DF-CONFIG deltaflow.yml: unknown key "
             "'kafak' (did you mean 'kafka'?)`. The stack trace behind it is in the run's log, which the "
             "line names (`deltaflow -v` shows Spark's own log on the terminal).", "",
             "| code | means | for example | usual fix |", "|---|---|---|---|"]
    for cls in sorted(error_classes(), key=lambda c: c.code):
        if cls.code != "DF":
            lines.append(f"| `{cls.code}` | {_cell(inspect.getdoc(cls) or '')} | "
                         f"`` error: {cls.code} {_cell(cls.example)} `` | {_cell(cls.fix)} |")
    return "\n".join([*lines, ""])


def metric_families() -> list[Any]:
    """The Prometheus metric families ``/metrics`` serves."""
    from deltaflow.ui.metrics import families

    return list(families({"pipeline": "p", "flows": [], "maintenance": []}, []))


def metrics_page() -> str:
    """Every metric of ``/metrics``: its type, labels and meaning."""
    lines = ["# Metrics", "", "`deltaflow ui` serves them at `/metrics` in Prometheus' text format. Counters "
             "are totals over the", "event log (every logged batch); gauges are the dashboard's current "
             "figures.", "", "| metric | type | labels | what |", "|---|---|---|---|"]
    for family in metric_families():
        labels = ", ".join(f"`{label}`" for label in getattr(family, "_labelnames", ()))
        suffix = "_total" if family.type == "counter" else ""
        lines.append(f"| `{family.name}{suffix}` | {family.type} | {labels} | "
                     f"{_cell(family.documentation)} |")
    return "\n".join([*lines, ""])


def page(name: str) -> str:
    """The markdown of reference page ``name`` (one of :data:`PAGES`)."""
    return {"cli": cli_page, "spec": spec_page, "api": api_page, "errors": errors_page,
            "metrics": metrics_page}[name]()


def main(into_site: bool) -> None:
    """Write the pages into the site being built (mkdocs-gen-files), or print them."""
    for name in PAGES:
        if into_site:
            import mkdocs_gen_files

            with mkdocs_gen_files.open(f"reference/{name}.md", "w") as out:
                out.write(page(name))
        else:
            print(page(name))
    if into_site:  # published beside the spec's page, as `deltaflow schema` prints it
        import mkdocs_gen_files

        from deltaflow.commands.init import schema_text

        with mkdocs_gen_files.open("reference/deltaflow.schema.json", "w") as out:
            out.write(schema_text())


if __name__ in ("__main__", "<run_path>"):  # run by itself, or by mkdocs-gen-files (runpy.run_path)
    main(into_site=__name__ == "<run_path>")
