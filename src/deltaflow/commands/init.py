"""``deltaflow init``: a new project, ready to run: a spec, a starter definition file, sample input.

The starter is a file pipeline, so that it runs with nothing else started: JSON lines dropped into
``landing/`` -> ``bronze_events`` (as received) -> ``silver_events`` (each event once; events without a user
quarantined) -> ``gold_actions`` (events and amount per action, a materialized view). ``--example NAME``
starts from a shipped example instead. A folder that is not empty is refused (nothing written) unless
``force``, which writes the project's files over same-named ones and leaves every other file alone.

Example:
    >>> written = init_project(Path("shop"))  # doctest: +SKIP
    >>> sorted(p.name for p in written)[:2]  # doctest: +SKIP
    ['.gitignore', 'README.md']

"""

from __future__ import annotations

import json
import re
from pathlib import Path

from deltaflow.errors import ConfigError

SPEC = """\
# yaml-language-server: $schema=deltaflow.schema.json
# The pipeline: its name, where its tables live, which files define it. Every key, with its meaning and
# default: `deltaflow schema`, or the reference in the documentation.
name: {name}
storage: data                # tables, checkpoints and logs (git-ignored)
libraries:
  - transformations/**       # every .py and .sql file under transformations/
configuration:
  landing: landing           # where JSON files are dropped: dp.parameter("landing")
"""

STARTER = '''\
"""A starter pipeline: JSON lines dropped into landing/ -> bronze -> silver -> gold.

`deltaflow run --available-now` reads each new file once and brings every table up to date; drop another
file into landing/ and run again. `deltaflow run --continuous` keeps watching the folder.
"""

from pyspark.sql import functions as F

import deltaflow as dp

EVENT_SCHEMA = "event_id STRING, user_id STRING, action STRING, amount DOUBLE, ts TIMESTAMP"


@dp.table(comment="Every line of every file in landing/, as received (a line that does not parse is kept "
          "whole in _corrupt_record)")
def bronze_events():
    return dp.read_files(dp.parameter("landing"), format="json", schema=EVENT_SCHEMA)


# An event without a user goes to silver_events_quarantine, with the rule it failed; each event_id once.
@dp.expect_or_quarantine("has_user", "user_id IS NOT NULL")
@dp.table(comment="Events with a user, each event once")
def silver_events():
    return (
        spark.readStream.table("bronze_events")
        .where(F.col("_corrupt_record").isNull())
        .drop("_corrupt_record")
        .withWatermark("ts", "1 day")  # a resent event is recognised for a day
        .dropDuplicatesWithinWatermark(["event_id"])
    )


@dp.materialized_view(comment="Events and amount per action")
def gold_actions():
    return (
        spark.read.table("silver_events")
        .groupBy("action")
        .agg(F.count("*").alias("events"), F.round(F.sum("amount"), 2).alias("amount"))
    )
'''

SAMPLE = [
    {"event_id": "e1", "user_id": "u1", "action": "view", "amount": 0.0, "ts": "2026-11-26T09:00:00Z"},
    {"event_id": "e2", "user_id": "u1", "action": "buy", "amount": 19.99, "ts": "2026-11-26T09:01:00Z"},
    {"event_id": "e3", "user_id": "u2", "action": "view", "amount": 0.0, "ts": "2026-11-26T09:02:00Z"},
    {"event_id": "e4", "user_id": None, "action": "buy", "amount": 5.0, "ts": "2026-11-26T09:03:00Z"},
    {"event_id": "e2", "user_id": "u1", "action": "buy", "amount": 19.99, "ts": "2026-11-26T09:01:00Z"},
    {"event_id": "e5", "user_id": "u3", "action": "buy", "amount": 42.5, "ts": "2026-11-26T09:04:00Z"},
]

README = """\
# {name}

A deltaflow pipeline (`deltaflow.yml`, `transformations/`): JSON files in `landing/` -> bronze -> silver ->
gold. Next:

    deltaflow dry-run                  # check every definition, write nothing
    deltaflow run --available-now      # read landing/, bring every table up to date
    deltaflow status                   # each flow's last batch, rows and backlog

`deltaflow ui` shows the same in a browser; `deltaflow history gold_actions` the versions of a table.
"""


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
        "deltaflow.yml": SPEC.format(name=name),
        "transformations/pipeline.py": STARTER,
        "landing/events-0001.json": "".join(json.dumps(e) + "\n" for e in SAMPLE),
        "README.md": README.format(name=name),
    }
    files[".gitignore"] = "# deltaflow's tables, checkpoints and logs\ndata/\n"
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

    source = example_path(example)
    files = {str(p.relative_to(source)): p.read_text() for p in sorted(source.rglob("*"))
             if p.is_file() and "__pycache__" not in p.parts}
    if "deltaflow.yml" in files:
        files["deltaflow.yml"] = SPEC.splitlines(keepends=True)[0] + files["deltaflow.yml"]
    return files


def schema_text() -> str:
    """The JSON Schema of ``deltaflow.yml``, as shipped (``deltaflow/deltaflow.schema.json``)."""
    from deltaflow.spec import json_schema

    return json.dumps(json_schema(), indent=2) + "\n"
