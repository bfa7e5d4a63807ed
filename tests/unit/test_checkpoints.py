"""Checkpoint folders: generations, and the leftovers of a write interrupted by a crash."""

from __future__ import annotations

from pathlib import Path

from deltaflow.runtime.checkpoints import clear_interrupted_writes


def test_interrupted_log_writes_are_removed_and_log_entries_kept(tmp_path: Path) -> None:
    kept = ["offsets/0", "offsets/.0.crc", "commits/0", "commits/.0.crc", "metadata", ".metadata.crc"]
    leftovers = ["offsets/.1.b1452b07-1ac3.tmp", "offsets/..1.b1452b07-1ac3.tmp.crc",
                 "commits/.1.0c9e.tmp"]
    for name in kept + leftovers:
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("{}")

    removed = clear_interrupted_writes(str(tmp_path))

    assert sorted(p.relative_to(tmp_path).as_posix() for p in removed) == sorted(leftovers)
    left = [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()]
    assert sorted(left) == sorted(kept)
    assert clear_interrupted_writes(str(tmp_path / "never-ran")) == []
