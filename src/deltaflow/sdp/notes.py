"""The notes deltaflow gives where it runs an SDP definition differently (one wording, Python or SQL).

Examples:
    >>> table_notes("sales", "parquet", ("region",))[0]
    "'sales' is stored as a Delta table, not parquet"

"""

from __future__ import annotations

from collections.abc import Sequence


def table_notes(name: str, stored_as: str | None, cluster_by: Sequence[str] | None) -> list[str]:
    """What differs for table ``name`` asked to be stored as ``stored_as`` and clustered by ``cluster_by``."""
    notes = []
    if stored_as not in (None, "delta"):
        notes.append(f"'{name}' is stored as a Delta table, not {stored_as}")
    if cluster_by:
        notes.append(f"cluster_by of '{name}': not applied; deltaflow clusters with maintenance.zorder: "
                     f"{{{name}: [{', '.join(cluster_by)}]}}")
    return notes


def one_session(what: str) -> str:
    """Why a per-flow or per-file Spark setting (``what``) is not applied."""
    return f"{what}: every flow runs in the pipeline's one session; set it under configuration in the spec"
