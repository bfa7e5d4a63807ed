"""On local storage the session's Hadoop file system makes no child process (``InProcessLocalFs`` and co.).

Without Hadoop's native library, Hadoop's own forks ``chmod`` for each file it creates and ``readlink`` for
both ends of each rename (a Delta commit, a checkpoint file); the JVM's flight recorder sees each one as a
``jdk.ProcessStart`` event.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

HADOOPS = "org.apache.hadoop.fs.local.LocalFs"


def child_processes(spark: Any, tmp_path: Path, work: Callable[[], None]) -> list[str]:
    """The commands of the child processes the JVM started during ``work`` that name ``tmp_path``."""
    jvm = spark.sparkContext._jvm
    recording = jvm.jdk.jfr.Recording()
    recording.enable("jdk.ProcessStart")
    recording.start()
    try:
        work()
    finally:
        recording.stop()
    dump = jvm.java.io.File(str(tmp_path / "forks.jfr")).toPath()
    recording.dump(dump)
    recording.close()
    events = jvm.jdk.jfr.consumer.RecordingFile.readAllEvents(dump)
    # (a recording of the whole JVM running meanwhile, a profiler's, adds its event types to this file)
    starts = [e for e in events if e.getEventType().getName() == "jdk.ProcessStart"]
    return [c for c in (e.getString("command") for e in starts) if str(tmp_path) in c]


def write_checkpoint_file(spark: Any, folder: Path, file_system: str | None) -> None:
    """Write one file as Spark writes a checkpoint's (a temporary file, renamed), on ``file_system``."""
    jvm = spark.sparkContext._jvm
    conf = spark._jsparkSession.sessionState().newHadoopConf()
    if file_system:
        conf.set("fs.AbstractFileSystem.file.impl", file_system)
    path = jvm.org.apache.hadoop.fs.Path(f"file://{folder}/0")
    checkpointing = jvm.org.apache.spark.sql.execution.streaming.checkpointing
    manager = checkpointing.FileContextBasedCheckpointFileManager(path.getParent(), conf)
    manager.mkdirs(path.getParent())
    out = manager.createAtomic(path, False)
    out.write(b"v1")
    out.close()


def test_a_micro_batch_on_local_storage_starts_no_child_process(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    def micro_batch() -> None:
        spark.range(10).write.format("delta").save(str(tmp_path / "source"))
        query = (spark.readStream.format("delta").load(str(tmp_path / "source")).writeStream.format("delta")
                 .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True)
                 .start(str(tmp_path / "copy")))
        query.awaitTermination()
        write_checkpoint_file(spark, tmp_path / "ours", None)

    assert child_processes(spark, tmp_path, micro_batch) == []
    assert spark.read.format("delta").load(str(tmp_path / "copy")).count() == 10
    assert (tmp_path / "ours" / "0").read_bytes() == b"v1"
    # the check sees Hadoop's own file system fork for the same file
    hadoops = child_processes(spark, tmp_path,
                              lambda: write_checkpoint_file(spark, tmp_path / "hadoops", HADOOPS))
    assert any(c.startswith("chmod") for c in hadoops) and any(c.startswith("readlink") for c in hadoops)
    assert (tmp_path / "hadoops" / "0").read_bytes() == b"v1"


def test_permissions_and_link_statuses_are_hadoops(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    jvm = spark.sparkContext._jvm
    conf = spark._jsparkSession.sessionState().newHadoopConf()
    ours = jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI("file:///"), conf).getRaw()
    assert ours.getClass().getName() == "io.deltaflow.storage.InProcessRawLocalFileSystem"
    hadoops = jvm.org.apache.hadoop.fs.RawLocalFileSystem()
    hadoops.initialize(jvm.java.net.URI("file:///"), conf)

    file, folder, link = tmp_path / "file", tmp_path / "folder", tmp_path / "link"
    file.write_text("12345")
    folder.mkdir()
    link.symlink_to(file)

    def link_status(fs: Any, path: Path) -> tuple[Any, ...]:
        status = fs.getFileLinkStatus(jvm.org.apache.hadoop.fs.Path(f"file://{path}"))
        return status.isSymlink(), status.isDirectory(), status.getLen(), status.getPath().toString()

    for path in (file, folder, link):
        assert link_status(ours, path) == link_status(hadoops, path), path
    for mode in ("640", "755", "600", "1777"):
        ours.setPermission(jvm.org.apache.hadoop.fs.Path(f"file://{folder}"),
                           jvm.org.apache.hadoop.fs.permission.FsPermission(mode))
        assert oct(stat.S_IMODE(os.stat(folder).st_mode)) == oct(int(mode, 8)), mode
