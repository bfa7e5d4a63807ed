"""The layout of everything under a pipeline's ``storage``; the only place such a location is spelled.

::

    <storage>/tables/<dataset>                               each dataset's Delta table
    <storage>/tables/<dataset>/_delta_log                    its log (Delta's layout), read by `history`
    <storage>/tables/<dataset>_quarantine                    its quarantined rows
    <storage>/_checkpoints/<dataset>/<flow>/<generation>     each flow's checkpoint (a full refresh moves on)
    <storage>/_checkpoints/<dataset>/<flow>/<generation>/tombstones   an auto CDC flow's deletes
    <storage>/_checkpoints/<dataset>/<flow>/<generation>/incremental.json   an incremental view's plan
    <storage>/_staging/<dataset>/refresh.json, table         a full refresh: its record and staging table
    <storage>/_replay/<table>.json                           a quarantine replay's record
    <storage>/_rewind/<table>.json                           a rewind's record
    <storage>/_leases/<table>.json                           which run holds the table (one writer)
    <storage>/_event_log                                     one row per micro-batch of every flow
    <storage>/_pipeline/graph.json                           the resolved graph of the last run (`ui`)
    <storage>/_pipeline/definitions.json                     each dataset's definition fingerprint, as run
    <storage>/_logs/spark.log                                Spark's own output in `deltaflow demo`
    <storage>/_warehouse                                     Spark's warehouse (local storage)
    <storage>/_metastore/                                    the embedded metastore (Derby), its log

Names starting with ``_`` never collide with a dataset. Records go through the layout's
:class:`~deltaflow.storage.fs.FileSystem`.

Examples:
    >>> layout = StorageLayout("/data")
    >>> layout.table("bronze_clicks")
    '/data/tables/bronze_clicks'
    >>> layout.checkpoint("customers", "customers_cdc", generation=2).app_id("q-1")
    'deltaflow:customers/customers_cdc/2:q-1'

"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from deltaflow.storage.fs import FileSystem, ReadOnce, filesystem_for, local_path

if TYPE_CHECKING:
    from deltalake import DeltaTable

    from deltaflow.spec import S3Spec, Spec

QUARANTINE_SUFFIX = "_quarantine"


@dataclass(frozen=True)
class FlowCheckpoint:
    """One generation of one flow's checkpoint: where Spark keeps the flow's progress.

    Its identity (dataset, flow, generation) is the ``txnAppId`` of the flow's idempotent writes, so a
    full refresh, which starts a new generation, never has its first batches skipped as already written.
    """

    dataset: str
    flow: str
    generation: int
    path: str

    @property
    def tombstones(self) -> str:
        """An auto CDC flow's tombstone table (in the checkpoint, so a full refresh starts without them)."""
        return f"{self.path}/tombstones"

    @property
    def commits(self) -> str:
        """Spark's commit log of the checkpoint: one file per finished batch, named by its id."""
        return f"{self.path}/commits"

    @property
    def offsets(self) -> str:
        """Spark's offset log of the checkpoint: one file per planned batch, named by its id."""
        return f"{self.path}/offsets"

    @property
    def view_plan(self) -> str:
        """An incremental view's plan, as its state was built (a different plan needs a full refresh)."""
        return f"{self.path}/incremental.json"

    @property
    def carries(self) -> str:
        """A carrier's record: the flows its query writes besides its own (:mod:`deltaflow.sinks.carry`)."""
        return f"{self.path}/carries.json"

    @property
    def carried_by(self) -> str:
        """A carried flow's record: the checkpoint whose query writes its table (its position lives there)."""
        return f"{self.path}/carried_by.json"

    @property
    def left_from(self) -> str:
        """A former carrier's new generation while it is copied from the old (:mod:`.carry_plan`)."""
        return f"{self.path}/left_from.json"

    @property
    def joined_from(self) -> str:
        """A carrier's new generation while flows that ran alone join it (:mod:`.carry_plan`)."""
        return f"{self.path}/joined_from.json"

    @property
    def starts_at(self) -> str:
        """Where a flow that left its carrier starts reading alone (:mod:`.carry_plan`): table and version."""
        return f"{self.path}/starts_at.json"

    @property
    def metadata(self) -> str:
        """Spark's ``metadata`` file of the checkpoint, holding the query id."""
        return f"{self.path}/metadata"

    def app_id(self, query_id: str) -> str:
        """``txnAppId`` of the flow's writes: ``deltaflow:<dataset>/<flow>/<generation>:<query id>``."""
        return f"deltaflow:{self.dataset}/{self.flow}/{self.generation}:{query_id}"

    @staticmethod
    def of_app_id(app_id: str) -> tuple[str, str, int] | None:
        """``(dataset, flow, generation)`` of an :meth:`app_id` (None for any other id).

        Examples:
            >>> FlowCheckpoint.of_app_id("deltaflow:customers/customers_cdc/2:q-1")
            ('customers', 'customers_cdc', 2)

        """
        match = re.fullmatch(r"deltaflow:([^/]+)/([^/]+)/(\d+):.*", app_id)
        return (match.group(1), match.group(2), int(match.group(3))) if match else None


@dataclass(frozen=True)
class StorageLayout:
    """Where everything under ``root`` (the spec's ``storage``) lives.

    Args:
        root: The storage folder (absolute) or URI.
        s3: How to reach S3 when ``root`` is there (the spec's ``s3:``).

    """

    root: str
    s3: S3Spec | None = None

    @classmethod
    def of(cls, spec: Spec) -> StorageLayout:
        """The layout of ``spec``'s storage."""
        return cls(spec.storage_path, spec.s3)

    @cached_property
    def fs(self) -> FileSystem:
        """The filesystem the layout's records and checkpoint folders go through."""
        return filesystem_for(self.root, self.s3)

    def read_once(self) -> StorageLayout:
        """The same layout, over a filesystem that reads each thing once (:class:`.ReadOnce`).

        For one reader's moment (a ``status`` call): on object storage every repeated ask is a request.
        """
        view = StorageLayout(self.root, self.s3)
        view.__dict__["fs"] = ReadOnce(self.fs)  # the cached_property's slot: frozen, but not to it
        return view

    @property
    def storage_options(self) -> dict[str, str]:
        """``deltalake``'s ``storage_options`` for the tables under ``root``."""
        from deltaflow.storage.s3 import delta_options, is_s3

        return delta_options(self.s3) if is_s3(self.root) else {}

    def open_table(self, path: str, version: int | None = None) -> DeltaTable:
        """The Delta table at ``path`` (under ``root``), read with ``deltalake`` (no JVM).

        Raises:
            deltalake.exceptions.TableNotFoundError: There is no table at ``path``.

        """
        from deltalake import DeltaTable

        return DeltaTable(path, version=version, storage_options=self.storage_options or None)

    def check(self) -> None:
        """Make sure the storage answers (an S3 bucket with these keys), in one line if not.

        Raises:
            StorageError: The endpoint, the credentials or the bucket is wrong.

        """
        from deltaflow.storage.s3 import S3FileSystem

        if isinstance(self.fs, S3FileSystem):
            self.fs.check(self.root)

    @property
    def is_local(self) -> bool:
        """Whether ``root`` is on the local disk."""
        return local_path(self.root) is not None

    # -- tables -----------------------------------------------------------------------------------------

    @property
    def tables(self) -> str:
        """The folder holding every table."""
        return f"{self.root}/tables"

    def delta_log(self, dataset: str) -> str:
        """The Delta log of ``dataset``'s table (Delta's own layout: ``<version, 20 digits>.json``)."""
        return f"{self.table(dataset)}/_delta_log"

    def commit_file(self, dataset: str, version: int) -> str:
        """The Delta log entry of ``version`` of ``dataset``'s table (gone once the log retention passes)."""
        return self.commit_file_at(self.table(dataset), version)

    @staticmethod
    def commit_file_at(table_path: str, version: int) -> str:
        """The Delta log entry of ``version`` of the Delta table at ``table_path`` (a tombstone table)."""
        return f"{table_path}/_delta_log/{version:020d}.json"

    def table(self, dataset: str) -> str:
        """The Delta table of ``dataset``."""
        return f"{self.tables}/{dataset}"

    @staticmethod
    def quarantine_name(dataset: str) -> str:
        """The name of ``dataset``'s quarantine table."""
        return f"{dataset}{QUARANTINE_SUFFIX}"

    def quarantine(self, dataset: str) -> str:
        """The Delta table of ``dataset``'s quarantined rows."""
        return self.table(self.quarantine_name(dataset))

    def quarantined_tables(self) -> list[str]:
        """The tables that have a quarantine table."""
        return [n.removesuffix(QUARANTINE_SUFFIX) for n in self.fs.list(self.tables)
                if n.endswith(QUARANTINE_SUFFIX)]

    def table_names(self) -> list[str]:
        """The names of the tables in storage."""
        return self.fs.list(self.tables)

    @property
    def event_log(self) -> str:
        """The event log's Delta table."""
        return f"{self.root}/_event_log"

    @property
    def graph_record(self) -> str:
        """The resolved dataset graph the last run wrote, for readers without Spark (``deltaflow ui``)."""
        return f"{self.root}/_pipeline/graph.json"

    @property
    def definitions_record(self) -> str:
        """Each dataset's definition fingerprint as the runs so far have built it (``deltaflow plan``)."""
        return f"{self.root}/_pipeline/definitions.json"

    @property
    def run_logs(self) -> str:
        """The folder of the runs' logs on local storage (see ``runtime.run_log``)."""
        return f"{self.root}/_logs"

    @property
    def warehouse(self) -> str:
        """Spark's warehouse folder."""
        return f"{self.root}/_warehouse"

    @property
    def metastore(self) -> str:
        """The embedded metastore's folder: its Derby database (``db``) and Derby's log (local storage)."""
        return f"{self.root}/_metastore"

    # -- checkpoints --------------------------------------------------------------------------------------

    def checkpoints(self, dataset: str, flow: str) -> str:
        """The folder holding every generation of one flow's checkpoint."""
        return f"{self.root}/_checkpoints/{dataset}/{flow}"

    def current_generation(self, dataset: str, flow: str) -> int:
        """The newest generation of a flow's checkpoint (0 for a flow that never ran)."""
        names = self.fs.list(self.checkpoints(dataset, flow))
        return max((int(n) for n in names if n.isdigit()), default=0)

    def checkpoint(self, dataset: str, flow: str, generation: int | None = None) -> FlowCheckpoint:
        """A generation of a flow's checkpoint (default: the current one)."""
        if generation is None:
            generation = self.current_generation(dataset, flow)
        return FlowCheckpoint(dataset, flow, generation, f"{self.checkpoints(dataset, flow)}/{generation}")

    def position(self, dataset: str, flow: str) -> FlowCheckpoint:
        """The checkpoint that holds how far ``flow`` has read: its own, or its carrier's.

        A flow carried by an upstream flow's query (:mod:`deltaflow.sinks.carry`) has no offsets of its
        own; it has read exactly what its carrier has.
        """
        checkpoint = self.checkpoint(dataset, flow)
        return self.carrier(checkpoint) or checkpoint

    def carrier(self, checkpoint: FlowCheckpoint) -> FlowCheckpoint | None:
        """The checkpoint of the query that carries the flow of ``checkpoint`` (None: it runs alone)."""
        text = self.fs.read_text(checkpoint.carried_by)
        if text is None:
            return None
        carrier = json.loads(text)
        return self.checkpoint(carrier["dataset"], carrier["flow"], int(carrier["generation"]))

    def start_of(self, checkpoint: FlowCheckpoint) -> tuple[str, int] | None:
        """``(table, version)`` a flow that left its carrier starts reading from, until its first batch.

        Examples:
            >>> layout.start_of(layout.checkpoint("silver", "silver"))  # doctest: +SKIP
            ('bronze', 4)

        """
        text = self.fs.read_text(checkpoint.starts_at)
        if text is None or any(n.isdigit() for n in self.fs.list(checkpoint.offsets)):
            return None
        record = json.loads(text)
        return None if record["version"] is None else (str(record["table"]), int(record["version"]))

    def flow_checkpoints(self, dataset: str) -> list[FlowCheckpoint]:
        """Every generation of every flow's checkpoint into ``dataset`` that is on storage."""
        root = f"{self.root}/_checkpoints/{dataset}"
        return [self.checkpoint(dataset, flow, int(generation)) for flow in self.fs.list(root)
                for generation in self.fs.list(f"{root}/{flow}") if generation.isdigit()]

    def current_checkpoints(self) -> list[FlowCheckpoint]:
        """The current generation of every flow's checkpoint on storage, of every dataset."""
        root = f"{self.root}/_checkpoints"
        return [self.checkpoint(dataset, flow) for dataset in self.fs.list(root)
                for flow in self.fs.list(f"{root}/{dataset}")]

    def start_generation(self, dataset: str, flow: str, generation: int) -> FlowCheckpoint:
        """Make ``generation`` the flow's current one: an empty checkpoint, so the flow starts over."""
        checkpoint = self.checkpoint(dataset, flow, generation)
        self.fs.make_dirs(checkpoint.path)
        return checkpoint

    def query_id(self, checkpoint: FlowCheckpoint) -> str:
        """The id of the query checkpointed at ``checkpoint`` (once it has started)."""
        metadata = self.fs.read_text(checkpoint.metadata)
        return str(json.loads(metadata.splitlines()[0])["id"]) if metadata else "unknown"

    # -- full refresh and replay --------------------------------------------------------------------------

    def staging(self, dataset: str) -> str:
        """The folder of a full refresh of ``dataset``: its record and staging table."""
        return f"{self.root}/_staging/{dataset}"

    def staging_table(self, dataset: str) -> str:
        """The table a full refresh of ``dataset`` rebuilds into before replacing the real one."""
        return f"{self.staging(dataset)}/table"

    def refresh_record(self, dataset: str) -> str:
        """The record of an unfinished full refresh of ``dataset``."""
        return f"{self.staging(dataset)}/refresh.json"

    def replay_record(self, table: str) -> str:
        """The record of an unfinished quarantine replay of ``table``."""
        return f"{self.root}/_replay/{table}.json"

    def rewind_record(self, table: str) -> str:
        """The record of an unfinished rewind of ``table``."""
        return f"{self.root}/_rewind/{table}.json"

    def rewound_tables(self) -> list[str]:
        """The tables with an unfinished rewind."""
        return [n.removesuffix(".json") for n in self.fs.list(f"{self.root}/_rewind") if n.endswith(".json")]

    def lease(self, table: str) -> str:
        """The lease of ``table``: which run writes it, until when."""
        return f"{self.root}/_leases/{table}.json"

    @staticmethod
    def replay_app_id(table: str, replay_id: str) -> str:
        """``txnAppId`` of a quarantine replay's writes."""
        return f"deltaflow:replay/{table}/{replay_id}"
