"""A driver's scratch folder (``runtime/scratch.py``): kept while its process lives, swept once it is gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from deltaflow.runtime import scratch

HOLDER = """
import sys, time
from pathlib import Path
from deltaflow.runtime import scratch
folder = scratch.scratch_dir(Path(sys.argv[1]))
(folder / "blockmgr-1").mkdir()
(folder / "blockmgr-1" / "shuffle_0_0_0.data").write_bytes(b"x" * 4096)  # what a JVM leaves
print(folder, flush=True)
time.sleep(600)  # until killed
"""


def test_a_live_drivers_folder_is_kept_and_a_killed_ones_is_swept_with_its_files(tmp_path: Path) -> None:
    root = tmp_path / "scratch"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(root)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        folder = Path(holder.stdout.readline().strip())
        assert folder.parent == root and (folder / "blockmgr-1" / "shuffle_0_0_0.data").is_file()
        assert scratch.sweep(root) == [] and folder.is_dir()  # its process holds the lock
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert scratch.sweep(root) == [folder] and not folder.exists()


def test_a_folder_without_its_lock_is_swept_only_once_it_is_old(tmp_path: Path) -> None:
    new, old = tmp_path / "1-new", tmp_path / "2-old"
    new.mkdir()
    old.mkdir()
    past = time.time() - scratch.UNLOCKED_GRACE_SECONDS - 1
    os.utime(old, (past, past))
    assert scratch.sweep(tmp_path) == [old]  # the new one may be a driver between its mkdir and its lock
    assert new.is_dir()


def test_the_drivers_tmpdir_is_its_scratch_folder_unless_the_spec_sets_one() -> None:
    conf = scratch.with_scratch({"spark.driver.extraJavaOptions": "-Xss16m"})
    mine = scratch.scratch_dir()
    assert conf["spark.driver.extraJavaOptions"] == f"-Xss16m -Djava.io.tmpdir={mine}"
    assert mine.parent == scratch.scratch_root() and (mine / scratch.LOCK).is_file()
    assert mine not in scratch.sweep(scratch.scratch_root())  # this process is alive
    own = {"spark.driver.extraJavaOptions": "-Djava.io.tmpdir=/data/spark-tmp"}
    assert scratch.with_scratch(own) == own
