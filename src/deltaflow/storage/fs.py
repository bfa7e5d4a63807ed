"""The filesystem deltaflow's own files go through: checkpoint folders, refresh and replay records.

Delta tables are read and written by Spark or ``deltalake``, which know every store. The files deltaflow
keeps beside them go through :class:`FileSystem`: a handful of operations, so that a store is one class:
:class:`LocalFileSystem` (a plain path or ``file://``) and :class:`~deltaflow.storage.s3.S3FileSystem`.

Examples:
    >>> import tempfile
    >>> fs = LocalFileSystem()
    >>> root = tempfile.mkdtemp()
    >>> fs.write_text(f"{root}/a/record.json", '{"x": 1}')
    >>> fs.read_text(f"{root}/a/record.json"), fs.list(f"{root}/a")
    ('{"x": 1}', ['record.json'])

"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from deltaflow.errors import ConfigError, StorageError

if TYPE_CHECKING:
    from deltaflow.spec import S3Spec

T = TypeVar("T")


class FileSystem(Protocol):
    """The file operations deltaflow needs beside its Delta tables."""

    def read_text(self, path: str) -> str | None:
        """The file's text, or None when there is no such file."""

    def read_bytes(self, path: str) -> bytes | None:
        """The file's bytes, or None when there is no such file."""

    def write_text(self, path: str, text: str) -> None:
        """Write the file atomically (readers see the old content or the new, never a part), with parents."""

    def read_versioned(self, path: str) -> tuple[str, str] | None:
        """The file's text and a token naming this content (for :meth:`write_if`), or None."""

    def write_if(self, path: str, text: str, token: str | None) -> str | None:
        """Write the file only if it still holds ``token``'s content (None: only if there is no file).

        The compare-and-swap of the table leases: of two writers racing from the same token, one wins.
        Returns the new content's token, or None when the file had changed (nothing written).
        """

    def list(self, path: str) -> list[str]:
        """The names in folder ``path``, sorted ([] when there is no such folder)."""

    def is_dir(self, path: str) -> bool:
        """Whether ``path`` is a folder."""

    def exists(self, path: str) -> bool:
        """Whether there is a file or folder at ``path``."""

    def copy(self, source: str, target: str) -> None:
        """Copy file ``source`` to ``target`` (its folder created), replacing what is there."""

    def make_dirs(self, path: str) -> None:
        """Create folder ``path`` and its parents (nothing when it exists)."""

    def delete(self, path: str) -> None:
        """Delete file ``path`` (nothing when it is not there)."""

    def delete_tree(self, path: str) -> None:
        """Delete folder ``path`` and all it holds (nothing when it is not there)."""


class LocalFileSystem:
    """:class:`FileSystem` on the local disk."""

    def read_text(self, path: str) -> str | None:  # noqa: D102
        data = self.read_bytes(path)
        return None if data is None else data.decode(errors="replace")

    def read_bytes(self, path: str) -> bytes | None:  # noqa: D102
        try:
            return Path(path).read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    def write_text(self, path: str, text: str) -> None:  # noqa: D102
        target = Path(path)
        partial = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            partial.write_text(text)
            os.replace(partial, target)
        except OSError as exc:  # a full disk, a folder made read-only: one line, the file left as it was
            partial.unlink(missing_ok=True)
            full = exc.errno == errno.ENOSPC
            raise StorageError(f"cannot write: {exc.strerror or exc}", location=path,
                               hint="free space on that disk, then run again" if full else None) from exc

    def read_versioned(self, path: str) -> tuple[str, str] | None:  # noqa: D102
        text = self.read_text(path)
        return None if text is None else (text, hashlib.sha256(text.encode()).hexdigest())

    def write_if(self, path: str, text: str, token: str | None) -> str | None:  # noqa: D102
        with _locked(f"{path}.lock"):
            found = self.read_versioned(path)
            if (found[1] if found else None) != token:
                return None
            self.write_text(path, text)
            return hashlib.sha256(text.encode()).hexdigest()

    def list(self, path: str) -> list[str]:  # noqa: D102
        folder = Path(path)
        return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []

    def is_dir(self, path: str) -> bool:  # noqa: D102
        return Path(path).is_dir()

    def exists(self, path: str) -> bool:  # noqa: D102
        return Path(path).exists()

    def copy(self, source: str, target: str) -> None:  # noqa: D102
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)

    def make_dirs(self, path: str) -> None:  # noqa: D102
        Path(path).mkdir(parents=True, exist_ok=True)

    def delete(self, path: str) -> None:  # noqa: D102
        Path(path).unlink(missing_ok=True)

    def delete_tree(self, path: str) -> None:  # noqa: D102
        shutil.rmtree(path, ignore_errors=True)


class ReadOnce:
    """A :class:`FileSystem` over another that makes each read once: one moment's view of the storage.

    For a reader that asks the same folder or file from several places (``status`` lists every checkpoint
    for the backlog and again for the retention warnings): on object storage each ask is a request. Writes
    go through and forget what was read.

    Examples:
        >>> fs = ReadOnce(LocalFileSystem())
        >>> fs.list("/nonexistent") == fs.list("/nonexistent") == []  # asked the disk once
        True

    """

    def __init__(self, inner: FileSystem) -> None:
        self.inner = inner
        self._read: dict[tuple[str, str], object] = {}

    def _once(self, kind: str, path: str, read: Callable[[str], T]) -> T:
        key = (kind, path)
        if key not in self._read:
            self._read[key] = read(path)
        return self._read[key]  # type: ignore[return-value]

    def read_text(self, path: str) -> str | None:  # noqa: D102
        return self._once("text", path, self.inner.read_text)

    def read_bytes(self, path: str) -> bytes | None:  # noqa: D102
        return self._once("bytes", path, self.inner.read_bytes)

    def read_versioned(self, path: str) -> tuple[str, str] | None:  # noqa: D102
        return self._once("versioned", path, self.inner.read_versioned)

    def list(self, path: str) -> list[str]:  # noqa: D102
        return list(self._once("list", path, self.inner.list))

    def is_dir(self, path: str) -> bool:  # noqa: D102
        return self._once("is_dir", path, self.inner.is_dir)

    def exists(self, path: str) -> bool:  # noqa: D102
        return self._once("exists", path, self.inner.exists)

    def write_text(self, path: str, text: str) -> None:  # noqa: D102
        self._read.clear()
        self.inner.write_text(path, text)

    def write_if(self, path: str, text: str, token: str | None) -> str | None:  # noqa: D102
        self._read.clear()
        return self.inner.write_if(path, text, token)

    def copy(self, source: str, target: str) -> None:  # noqa: D102
        self._read.clear()
        self.inner.copy(source, target)

    def make_dirs(self, path: str) -> None:  # noqa: D102
        self._read.clear()
        self.inner.make_dirs(path)

    def delete(self, path: str) -> None:  # noqa: D102
        self._read.clear()
        self.inner.delete(path)

    def delete_tree(self, path: str) -> None:  # noqa: D102
        self._read.clear()
        self.inner.delete_tree(path)


@contextmanager
def _locked(path: str) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if need be) among this machine's processes."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def local_path(uri: str) -> str | None:
    """``uri`` as a local path (a plain path or ``file://``), or None for any other store."""
    if uri.startswith("file://"):
        return uri.removeprefix("file://") or "/"
    return None if "://" in uri else uri


def filesystem_for(root: str, s3: S3Spec | None = None) -> FileSystem:
    """The filesystem holding ``root`` (``s3``: how to reach S3 when ``root`` is there).

    Raises:
        ConfigError: ``root`` is on a store deltaflow cannot keep its records on.

    """
    from deltaflow.storage.s3 import S3FileSystem, is_s3

    if local_path(root) is not None:
        return LocalFileSystem()
    if is_s3(root):
        return S3FileSystem(s3)
    raise ConfigError(f"storage '{root}': deltaflow keeps its records on local storage or S3 (s3a://)",
                      location="storage", hint="for GCS or ADLS see docs/production.md")
