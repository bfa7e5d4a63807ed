"""``spark-pipeline.yml``: Spark Declarative Pipelines' spec keys, in deltaflow's terms.

SDP writes ``libraries: [{glob: {include: transformations/**}}]``, a ``file://`` storage URI, and may name
a ``catalog`` and a ``database`` (or ``schema``). deltaflow's keys may sit beside them.

* a ``glob.include`` entry is a pattern like any other; a pattern ending in ``/**`` means every file under
  that folder (SDP's convention), ``.py`` and ``.sql`` alike;
* ``file:///path`` storage is the local path;
* ``database`` (or ``schema``) is where the tables are registered when the spec names a metastore too
  (deltaflow's ``metastore:``, embedded or ``{uri: ...}``), and a note otherwise: each table is then found
  by its path under ``storage`` only. ``catalog`` is Spark's session catalog (the metastore): any other
  name gets a note.

Examples:
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
    notes: list[str] = []
    session_catalogs = ("spark_catalog", "hive_metastore")
    if (catalog := data.pop("catalog", None)) is not None and catalog not in session_catalogs:
        notes.append(f"{path}: catalog '{catalog}': deltaflow registers tables in Spark's session catalog "
                     "(the metastore), not in a catalog of that name")
    metastore = data.get("metastore")
    for key in ("database", "schema"):
        if key not in data:
            continue
        value = data.pop(key)
        if isinstance(metastore, dict) and "database" not in metastore:
            data["metastore"] = metastore = {**metastore, "database": value}
        elif not isinstance(metastore, dict):
            notes.append(f"{path}: {key} '{value}': no metastore named (metastore: {{}} for an embedded "
                         "one), so each table is found by its path under storage, registered nowhere")
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
