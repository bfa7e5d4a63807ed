"""A driver's scratch folder: where its JVM keeps its temporary files, swept once the driver is gone.

Spark writes a driver's temporary files under the JVM's ``java.io.tmpdir``: shuffle blocks, the working
copies of its RocksDB state stores (about 50 MB each here), the files it serves to Python workers. A JVM
that stops deletes them; one killed (SIGKILL, the OOM killer, a power cut) leaves them behind, and a
supervisor that restarts a crashing run fills the disk (on this project's machine, the killed drivers of
a few days of test and benchmark runs had left 22 GB in ``/tmp``).

So each driver gets a folder of its own, ``<tempdir>/deltaflow-scratch-<uid>/<pid>-<random>``, with a
``.lock`` file its Python process holds (``flock``) for as long as it lives; the kernel lets go of the
lock however the process ends. Each new driver first deletes the folders whose lock is free. A
``-Djava.io.tmpdir`` of the spec's own ``spark.driver.extraJavaOptions`` is left alone.

Examples:
    >>> conf = with_scratch({"spark.driver.extraJavaOptions": "-Xss16m"})  # doctest: +SKIP
    >>> conf["spark.driver.extraJavaOptions"]  # doctest: +SKIP
    '-Xss16m -Djava.io.tmpdir=/tmp/deltaflow-scratch-1000/4242-k2j1x9'

"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import time
from pathlib import Path

LOCK = ".lock"
#: A folder with no lock file yet is being made; one older than this lost its process before the lock.
UNLOCKED_GRACE_SECONDS = 60.0
OPTION = "-Djava.io.tmpdir="

_mine: tuple[Path, int] | None = None


def scratch_root() -> Path:
    """Where every driver of this user keeps its scratch folder."""
    return Path(tempfile.gettempdir()) / f"deltaflow-scratch-{os.getuid()}"


def scratch_dir(root: Path | None = None) -> Path:
    """The scratch folder of this process, made and locked on the first call, after a :func:`sweep`."""
    global _mine
    if _mine is None:
        root = root or scratch_root()
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        sweep(root)
        folder = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=root))
        fd = os.open(folder / LOCK, os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: no one else holds it
        _mine = (folder, fd)
    return _mine[0]


def sweep(root: Path) -> list[Path]:
    """Delete the folders under ``root`` whose process is gone (their lock free); the ones deleted."""
    deleted = []
    for folder in sorted(root.iterdir()) if root.is_dir() else ():
        if _mine is not None and folder == _mine[0]:
            continue
        try:
            fd = os.open(folder / LOCK, os.O_RDWR)
        except FileNotFoundError:
            if _age(folder) > UNLOCKED_GRACE_SECONDS:
                shutil.rmtree(folder, ignore_errors=True)
                deleted.append(folder)
            continue
        except OSError:  # not a folder, or not ours
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)  # its driver is alive
            continue
        shutil.rmtree(folder, ignore_errors=True)
        os.close(fd)
        deleted.append(folder)
    return deleted


def _age(folder: Path) -> float:
    try:
        return time.time() - folder.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def with_scratch(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with the driver JVM's temporary files in this process's :func:`scratch_dir`.

    Unless ``spark.driver.extraJavaOptions`` already sets ``java.io.tmpdir``.
    """
    options = conf.get("spark.driver.extraJavaOptions", "")
    if OPTION in options:
        return conf
    return {**conf, "spark.driver.extraJavaOptions": f"{options} {OPTION}{scratch_dir()}".strip()}
