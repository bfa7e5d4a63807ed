"""The driver's class archive: built by setup, mapped by each driver deltaflow starts, harmless when stale."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from deltaflow.runtime import class_archive


def test_the_driver_maps_the_archive_that_setup_built(spark: SparkSession) -> None:
    archive = class_archive.archive_file()
    assert archive is not None and archive.is_file(), "'make setup' builds the archive"
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()  # type: ignore[union-attr]
    info = subprocess.run(["jcmd", str(pid), "VM.info"], capture_output=True, text=True, check=True).stdout
    mapped = re.search(r"CDS archive\(s\) mapped at: .*?, size (\d+)", info)
    assert mapped, "the driver runs without class data sharing"
    # Without the archive only the JDK's own (~12 MB) is mapped; with it, the JDK's plus all of deltaflow's.
    assert int(mapped.group(1)) >= archive.stat().st_size


def test_a_stale_or_broken_archive_is_ignored_silently(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DELTAFLOW_HOME", str(tmp_path))
    archive = class_archive.archive_file()
    assert archive is not None
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"not an archive" * 100)
    options = class_archive.java_options()
    assert str(archive) in options
    java = subprocess.run(["java", *options.split(), "-version"], capture_output=True, text=True, check=False)
    assert java.returncode == 0
    assert "archive" not in java.stderr.lower() and "cds" not in java.stderr.lower(), java.stderr

    monkeypatch.setenv("DELTAFLOW_CLASS_ARCHIVE", "0")
    assert class_archive.java_options() == ""
