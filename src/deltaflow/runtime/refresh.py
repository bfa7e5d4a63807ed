"""Full refresh: rebuild a dataset from scratch while readers keep seeing its old rows until the new ones.

A streaming table's flows move to a new checkpoint generation and first run (available-now) into a
staging table; then the table's rows are replaced by the staging table's in one overwrite commit, and the
flows go on from there into the table itself. Readers see the old rows, then all the new ones: never an
empty or half-filled table. A materialized view is recomputed and replaced in one commit.

The refresh is recorded in ``<storage>/_staging/<dataset>/refresh.json`` (the generations it moves to)
before anything changes, and that record is removed only once the table has been replaced; a run that
finds it (after a crash) finishes the refresh.

Example:
    >>> FullRefresh(storage, "silver_clicks").request({"silver_clicks": 1})  # doctest: +SKIP

"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from deltaflow.runtime.checkpoints import start_generation


@dataclass(frozen=True)
class FullRefresh:
    """The full-refresh record of one dataset."""

    storage: str
    dataset: str

    @property
    def staging(self) -> str:
        """The staging table's location."""
        return f"{self.storage}/_staging/{self.dataset}/table"

    @property
    def _record(self) -> Path:
        return Path(self.storage) / "_staging" / self.dataset / "refresh.json"

    def pending(self) -> dict[str, int] | None:
        """The generation of each flow of an unfinished refresh, or None."""
        if not self._record.is_file():
            return None
        return {str(k): int(v) for k, v in json.loads(self._record.read_text()).items()}

    def request(self, generations: dict[str, int]) -> None:
        """Record the refresh (atomically), then create the flows' new, empty checkpoint generations."""
        self._record.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._record.with_suffix(".tmp")
        tmp.write_text(json.dumps(generations))
        os.replace(tmp, self._record)
        for flow, generation in generations.items():
            start_generation(self.storage, self.dataset, flow, generation)

    def finish(self) -> None:
        """Forget the refresh and its staging table (the table has been replaced)."""
        self._record.unlink(missing_ok=True)
        shutil.rmtree(self._record.parent, ignore_errors=True)
