"""``spark-pipeline.yml``: Spark Declarative Pipelines' spec keys, in deltaflow's terms.

SDP writes ``libraries: [{glob: {include: transformations/**}}]``, a ``file://`` storage URI, and may name
a ``catalog`` and a ``database`` (or ``schema``). deltaflow's keys may sit beside them.

* a ``glob.include`` entry is a pattern like any other; a pattern ending in ``/**`` means every file under
  that folder (SDP's convention), ``.py`` and ``.sql`` alike;
* ``file:///path`` storage is the local path;
* ``catalog`` / ``database`` are accepted with a note: deltaflow keeps each table under ``storage`` by path
  and registers none in a catalog.

Example:
    >>> data, notes = sdp_keys({"name": "p", "storage": "file:///tmp/s",
    ...                         "libraries": [{"glob": {"include": "transformations/**"}}]}, "p.yml")
    >>> data["storage"], data["libraries"]
    ('/tmp/s', ['transformations/**/*'])

"""

from __future__ import annotations

from typing import Any

from deltaflow.errors import ConfigError

#: The spec file names ``spark-pipelines`` looks for.
SDP_SPEC_NAMES = ("spark-pipeline.yml", "spark-pipeline.yaml")


def sdp_keys(data: dict[str, Any], path: str) -> tuple[dict[str, Any], list[str]]:
    """``data`` (a parsed spec) with SDP's keys translated, and the notes on what differs.

    Raises:
        ConfigError: A ``libraries`` entry that is neither a pattern nor ``{glob: {include: pattern}}``.

    """
    data = dict(data)
    notes = [f"{path}: {key} '{data.pop(key)}': deltaflow keeps each table under storage, by path, and "
             "registers none in a catalog" for key in ("catalog", "database", "schema") if key in data]
    if isinstance(storage := data.get("storage"), str) and storage.startswith("file://"):
        data["storage"] = storage.removeprefix("file://")
    if isinstance(libraries := data.get("libraries"), list):
        data["libraries"] = [_pattern(entry, i, path) for i, entry in enumerate(libraries)]
    return data, notes


def _pattern(entry: Any, index: int, path: str) -> str:
    if isinstance(entry, dict) and isinstance(entry.get("glob"), dict) and isinstance(
            entry["glob"].get("include"), str):
        entry = entry["glob"]["include"]
    if not isinstance(entry, str):
        raise ConfigError(f"libraries.{index}: expected a file pattern or {{glob: {{include: pattern}}}}",
                          location=path)
    return f"{entry}/*" if entry.endswith("/**") else entry
