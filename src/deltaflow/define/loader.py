"""Load a pipeline's definition files (the spec's ``libraries`` globs) into a :class:`PipelineGraph`.

Python files run in a fresh namespace where ``spark`` is the active pipeline's SparkSession (looked up when
used, so importing a file never starts Spark) and ``dp`` is :mod:`deltaflow`; files written for Spark
Declarative Pipelines (``from pyspark import pipelines as dp``) register through :mod:`deltaflow.sdp`.
SQL files hold one dataset or flow per statement (:mod:`deltaflow.sdp.sql`).

Examples:
    >>> graph = load_graph(load_spec())  # doctest: +SKIP
    >>> sorted(graph.datasets)
    ['bronze_clicks']

"""

from __future__ import annotations

import hashlib
import json
import runpy
import traceback
from collections.abc import Callable
from pathlib import Path

from deltaflow.define.datasets import registering
from deltaflow.define.fingerprints import dataset_fingerprints
from deltaflow.define.graph import PipelineGraph
from deltaflow.errors import DeltaflowError, GraphError
from deltaflow.sources.delta import SparkProxy
from deltaflow.spec import Spec


def definition_files(spec: Spec) -> list[Path]:
    """The files matched by ``libraries``, in a stable order, each once.

    Raises:
        GraphError: A glob matches nothing (most often a typo).

    """
    files: list[Path] = []
    for pattern in spec.libraries:
        every = f"{pattern}/*" if pattern.endswith("/**") else pattern  # 'dir/**': every file under dir
        matched = sorted(p for p in spec.root.glob(every) if p.is_file() and p.suffix in (".py", ".sql")
                         and "__pycache__" not in p.parts)
        if not matched:
            raise GraphError(f"libraries entry '{pattern}' matches no .py or .sql file under {spec.root}",
                             location=str(spec.path))
        files.extend(p for p in matched if p not in files)
    return files


def definitions_fingerprint(spec: Spec) -> str:
    """A digest of what a run's graph is built from: deltaflow's version, the spec, every definition file.

    Secret values are left out (``Spec.redacted``). A module the definition files import is not in it:
    each dataset's fingerprint (:mod:`deltaflow.define.fingerprints`) sees the project's helpers.

    Examples:
        >>> definitions_fingerprint(spec)  # doctest: +SKIP
        '5be0c1...'

    """
    from deltaflow import __version__

    digest = hashlib.sha256(__version__.encode())
    digest.update(json.dumps(spec.redacted(), sort_keys=True, default=str).encode())
    for path in definition_files(spec):
        digest.update(f"\0{path}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def load_graph(spec: Spec, start_spark: Callable[[], object] | None = None) -> PipelineGraph:
    """Run every definition file and return the validated graph they registered.

    Definition files load without Spark, so mistakes show at once. A file that builds Spark columns at
    import (``sequence_by=F.col("ts")``, ``apply_as_deletes=F.expr(...)``) needs a running SparkContext:
    then ``start_spark`` is called and the files are loaded again.

    Raises:
        GraphError: A file fails to import (naming its file and line) or the graph is invalid.

    """
    try:
        return _load(spec)
    except GraphError as exc:
        if start_spark is None or not _needs_spark(exc.__cause__):
            raise
    start_spark()
    return _load(spec)


def _needs_spark(exc: BaseException | None) -> bool:
    frames = traceback.extract_tb(exc.__traceback__) if exc is not None else []
    return isinstance(exc, AssertionError) and any("_active_spark_context" in (f.line or "") for f in frames)


def _load(spec: Spec) -> PipelineGraph:
    import deltaflow
    from deltaflow.sdp.registry import sdp_registration
    from deltaflow.sdp.sql_flows import register_sql_file

    graph = PipelineGraph(notes=spec.notes)
    with registering(graph), sdp_registration(graph):  # 'from pyspark import pipelines as dp' too
        for file in definition_files(spec):
            if file.suffix == ".sql":
                register_sql_file(graph, file.read_text(), file)
                continue
            try:
                namespace = {"spark": SparkProxy(spec.configuration), "dp": deltaflow}
                runpy.run_path(str(file), init_globals=namespace,
                               run_name=f"deltaflow_definitions.{file.stem}")
            except DeltaflowError:
                raise
            except Exception as exc:
                message = f"{type(exc).__name__}: {exc}"
                if _needs_spark(exc):
                    message = "this line builds a Spark column, which needs Spark running while loading"
                raise GraphError(message, location=_failing_line(exc, file)) from exc
    graph.validate()
    graph.fingerprints = dataset_fingerprints(graph, spec.root, spec.parameters)  # now: the files as just run
    return graph


def _failing_line(exc: BaseException, file: Path) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == file]
    if isinstance(exc, SyntaxError) and exc.lineno:
        return f"{file}:{exc.lineno}"
    return f"{file}:{frames[-1].lineno}" if frames else str(file)
