"""Everything under a pipeline's ``storage``: where each thing lives, and how its files are handled.

- :mod:`deltaflow.storage.layout`: :class:`~deltaflow.storage.layout.StorageLayout`, the only place a
  location under ``storage`` is spelled (tables, checkpoints and their generations, staging, refresh and
  replay records, the event log, tombstones) and the app id of a flow's idempotent writes.
- :mod:`deltaflow.storage.fs`: the small filesystem interface the layout's files go through (read, atomic
  write, list, delete), with its local implementation.
"""

from deltaflow.storage.fs import FileSystem, LocalFileSystem, filesystem_for
from deltaflow.storage.layout import FlowCheckpoint, StorageLayout

__all__ = ["FileSystem", "FlowCheckpoint", "LocalFileSystem", "StorageLayout", "filesystem_for"]
