"""Checkpoint folders: the storage layout's locations and generations, and crash leftovers."""

from __future__ import annotations

import json
from pathlib import Path

from deltaflow.runtime.checkpoints import clear_interrupted_writes
from deltaflow.runtime.refresh import FullRefresh
from deltaflow.storage import LocalFileSystem, StorageLayout


def test_interrupted_log_writes_are_removed_and_log_entries_kept(tmp_path: Path) -> None:
    kept = ["offsets/0", "offsets/.0.crc", "commits/0", "commits/.0.crc", "metadata", ".metadata.crc"]
    leftovers = ["offsets/.1.b1452b07-1ac3.tmp", "offsets/..1.b1452b07-1ac3.tmp.crc",
                 "commits/.1.0c9e.tmp"]
    for name in kept + leftovers:
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("{}")

    removed = clear_interrupted_writes(LocalFileSystem(), str(tmp_path))

    assert sorted(Path(p).relative_to(tmp_path).as_posix() for p in removed) == sorted(leftovers)
    left = [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()]
    assert sorted(left) == sorted(kept)
    assert clear_interrupted_writes(LocalFileSystem(), str(tmp_path / "never-ran")) == []


def test_layout_spells_every_location_and_moves_generations(tmp_path: Path) -> None:
    layout = StorageLayout(str(tmp_path))
    assert layout.table("silver") == f"{tmp_path}/tables/silver"
    assert layout.quarantine("silver") == f"{tmp_path}/tables/silver_quarantine"
    assert layout.current_generation("silver", "silver") == 0  # never ran
    first = layout.checkpoint("silver", "silver")
    assert first.path == f"{tmp_path}/_checkpoints/silver/silver/0"
    assert first.tombstones == f"{first.path}/tombstones"

    refresh = FullRefresh(layout, "silver")
    refresh.request({"silver": 3})
    assert refresh.pending() == {"silver": 3}
    assert layout.current_generation("silver", "silver") == 3
    assert Path(layout.checkpoint("silver", "silver").path).is_dir()
    refresh.finish()
    assert refresh.pending() is None and not Path(layout.staging("silver")).exists()

    # The app id of idempotent writes is the checkpoint's identity: a new generation gets a new one.
    checkpoint = layout.checkpoint("silver", "silver")
    Path(checkpoint.metadata).write_text(json.dumps({"id": "q-7"}) + "\n")
    assert checkpoint.app_id(layout.query_id(checkpoint)) == "deltaflow:silver/silver/3:q-7"
    assert first.app_id("q-7") != checkpoint.app_id("q-7")


def test_records_are_written_whole(tmp_path: Path) -> None:
    fs = LocalFileSystem()
    target = str(tmp_path / "a" / "record.json")
    fs.write_text(target, "one")
    fs.write_text(target, "two")
    assert fs.read_text(target) == "two"
    assert fs.list(str(tmp_path / "a")) == ["record.json"]  # no temp file left beside it
    fs.delete(target)
    assert fs.read_text(target) is None and fs.list(str(tmp_path / "missing")) == []


def test_a_read_once_view_answers_each_read_once_until_it_writes(tmp_path: Path) -> None:
    layout = StorageLayout(str(tmp_path))
    view = layout.read_once()
    layout.fs.write_text(layout.lease("a"), "1")
    assert view.fs.list(f"{layout.root}/_leases") == ["a.json"]
    assert view.fs.read_text(layout.lease("a")) == "1"
    layout.fs.write_text(layout.lease("b"), "2")  # behind the view's back: it keeps its moment
    layout.fs.write_text(layout.lease("a"), "3")
    assert view.fs.list(f"{layout.root}/_leases") == ["a.json"]
    assert view.fs.read_text(layout.lease("a")) == "1"
    view.fs.delete(layout.lease("b"))  # its own write: it reads again
    assert view.fs.list(f"{layout.root}/_leases") == ["a.json"]
    assert view.fs.read_text(layout.lease("a")) == "3"
    assert view.table("x") == layout.table("x") and layout.fs.read_text(layout.lease("a")) == "3"


def test_a_restart_reads_the_log_from_the_start_of_the_newest_planned_batch(tmp_path: Path) -> None:
    from deltaflow.commands.readers import checkpoint_offsets, log_restart_offsets

    layout = StorageLayout(str(tmp_path))
    checkpoint = layout.start_generation("silver", "silver", 0)

    def plan(batch: int, version: int, snapshot: bool, committed: bool = True) -> None:
        offset = {"sourceVersion": 1, "reservoirId": "bronze-id", "reservoirVersion": version, "index": -1,
                  "isStartingVersion": snapshot}
        layout.fs.write_text(f"{checkpoint.offsets}/{batch}", f"v1\n{{}}\n{json.dumps(offset)}")
        if committed:
            layout.fs.write_text(f"{checkpoint.commits}/{batch}", "v1\n{}")

    assert log_restart_offsets(layout, checkpoint) == {}  # never planned a batch: reads nothing yet
    plan(0, 7, snapshot=True, committed=False)
    assert log_restart_offsets(layout, checkpoint) == {"bronze-id": 7}  # still reading the snapshot at 7
    plan(0, 8, snapshot=False)
    # the first batch's start (a snapshot before 8, or a startingVersion) is in no file: the whole log
    assert log_restart_offsets(layout, checkpoint) == {"bronze-id": None}
    plan(1, 30, snapshot=False)
    assert log_restart_offsets(layout, checkpoint) == {"bronze-id": 8}  # batch 1 is planned again from 8
    plan(2, 31, snapshot=False, committed=False)  # planned, not committed: it runs again, from 30
    assert log_restart_offsets(layout, checkpoint) == {"bronze-id": 30}
    assert checkpoint_offsets(layout, checkpoint) == {"bronze-id": 30}  # its data: after the last commit
