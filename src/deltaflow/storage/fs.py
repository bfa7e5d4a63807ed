"""The filesystem deltaflow's own files go through: checkpoint folders, refresh and replay records.

Delta tables are read and written by Spark or ``deltalake``, which know every store. The files deltaflow
keeps beside them go through :class:`FileSystem`: a handful of operations, so that a store is one class.
Only local storage (a plain path or ``file://``) has one today.

Example:
    >>> import tempfile
    >>> fs = LocalFileSystem()
    >>> root = tempfile.mkdtemp()
    >>> fs.write_text(f"{root}/a/record.json", '{"x": 1}')
    >>> fs.read_text(f"{root}/a/record.json"), fs.list(f"{root}/a")
    ('{"x": 1}', ['record.json'])

"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Protocol

from deltaflow.errors import ConfigError


class FileSystem(Protocol):
    """The file operations deltaflow needs beside its Delta tables."""

    def read_text(self, path: str) -> str | None:
        """The file's text, or None when there is no such file."""

    def write_text(self, path: str, text: str) -> None:
        """Write the file atomically (readers see the old content or the new, never a part), with parents."""

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
        try:
            return Path(path).read_text()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    def write_text(self, path: str, text: str) -> None:  # noqa: D102
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
        partial.write_text(text)
        os.replace(partial, target)

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


def local_path(uri: str) -> str | None:
    """``uri`` as a local path (a plain path or ``file://``), or None for any other store."""
    if uri.startswith("file://"):
        return uri.removeprefix("file://") or "/"
    return None if "://" in uri else uri


def filesystem_for(root: str) -> FileSystem:
    """The filesystem holding ``root``.

    Raises:
        ConfigError: ``root`` is on a store deltaflow cannot keep its records on yet.

    """
    if local_path(root) is not None:
        return LocalFileSystem()
    raise ConfigError(f"storage '{root}': only local storage (a path or file://) is supported so far",
                      location="storage", hint="object storage is on the way; use a local folder for now")
