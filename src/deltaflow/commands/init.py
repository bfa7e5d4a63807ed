"""``deltaflow init``: a new project, ready to run: a spec, a starter definition file, sample input.

The starter is a file pipeline, so that it runs with nothing else started: JSON lines dropped into
``landing/`` -> ``bronze_events`` (as received) -> ``silver_events`` (each event once; events without a user
quarantined) -> ``gold_actions`` (events and amount per action, a materialized view). ``--example NAME``
starts from a shipped example instead. A folder that is not empty is refused (nothing written) unless
``force``, which writes the project's files over same-named ones and leaves every other file alone.

Examples:
    >>> written = init_project(Path("shop"))  # doctest: +SKIP
    >>> sorted(p.name for p in written)[:2]  # doctest: +SKIP
    ['.gitignore', 'README.md']

"""

from __future__ import annotations

import json
import re
from pathlib import Path

from deltaflow.errors import ConfigError

#: The starter project, as files (the tutorial shows them): its name is written as ``my_pipeline``.
STARTER = Path(__file__).resolve().parents[1] / "templates" / "starter"
_NAME = "shop"  # the starter says it; init writes the folder's name instead


def init_project(folder: Path, example: str | None = None, force: bool = False) -> list[Path]:
    """Write a new project into ``folder`` (see the module); the files written.

    Raises:
        ConfigError: ``folder`` is not empty and ``force`` is not given, or ``example`` is unknown.

    """
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{folder} is a file, not a folder")
    there = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    if there and not force:
        shown = ", ".join(there[:3]) + (", ..." if len(there) > 3 else "")
        raise ConfigError(f"folder {folder} is not empty ({shown})",
                          hint="choose an empty or new folder, or pass --force to write the project's files "
                          "over same-named ones")
    name = re.sub(r"\W", "_", folder.resolve().name) or "pipeline"
    name = name if re.match(r"[A-Za-z_]", name) else f"p_{name}"
    files = _example_files(example) if example else {
        relative: text.replace(_NAME, name) for relative, text in _files(STARTER).items()}
    files.setdefault(".gitignore", (STARTER / ".gitignore").read_text())
    files["deltaflow.schema.json"] = schema_text()
    written = []
    for relative, text in files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written


def _example_files(example: str) -> dict[str, str]:
    from deltaflow.examples import example_path

    files = _files(example_path(example))
    if "deltaflow.yml" in files:  # the line that points editors to the schema
        files["deltaflow.yml"] = (STARTER / "deltaflow.yml").read_text().splitlines(keepends=True)[0] + \
            files["deltaflow.yml"]
    return files


def _files(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


def schema_text() -> str:
    """The JSON Schema of ``deltaflow.yml``, as shipped (``deltaflow/deltaflow.schema.json``)."""
    from deltaflow.spec import json_schema

    return json.dumps(json_schema(), indent=2) + "\n"
