"""The project verbs of ``deltaflow``: start a new project, print the spec's JSON Schema.

Neither needs a pipeline, a JVM or a server; ``deltaflow.cli.main`` registers them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from deltaflow.cli.shared import err, out, say


def init(
    folder: Annotated[Path, typer.Argument(help="Where to write the project (created if missing).")] = Path(),
    example: Annotated[str | None, typer.Option(help="Start from a shipped example (clickstream, orders, "
                                                "fraud, customers_cdc, sensors, sdp_orders, shop_kafka) "
                                                "instead of the starter.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Write into a folder that is not empty, over files "
                                        "of the same names.")] = False,
) -> None:
    """Write a new project: deltaflow.yml, a starter definition file, sample input, a README."""
    from deltaflow.commands.init import init_project

    written = init_project(folder, example, force)
    where = folder if folder != Path() else Path.cwd()
    say(f"wrote {len(written)} file(s) into {where}:", err)
    for path in written:
        say(f"  {path.relative_to(folder)}", err)
    go = f"cd {folder} && " if folder != Path() else ""
    say(f"next: {go}deltaflow dry-run && deltaflow run --available-now && deltaflow status", err)


def schema() -> None:
    """Print the JSON Schema of deltaflow.yml (editors complete and check a spec with it)."""
    from deltaflow.spec import json_schema

    say(json.dumps(json_schema(), indent=2), out)


PROJECT_VERBS = (init, schema)
