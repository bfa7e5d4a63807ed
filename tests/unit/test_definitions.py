from __future__ import annotations

from pathlib import Path

import pytest

import deltaflow as dp
from deltaflow.define.datasets import registering
from deltaflow.define.graph import PipelineGraph
from deltaflow.errors import GraphError
from deltaflow.pipeline import Pipeline
from deltaflow.spec import parse_spec


def test_table_registers_bare_and_with_arguments() -> None:
    graph = PipelineGraph()
    with registering(graph):
        @dp.table
        def bronze_a():  # type: ignore[no-untyped-def]
            return None

        @dp.table(name="bronze_b", comment="raw b", partition_cols=["day"],
                  table_properties={"delta.appendOnly": "true"})
        def whatever():  # type: ignore[no-untyped-def]
            return None

    assert sorted(graph.datasets) == ["bronze_a", "bronze_b"]
    b = graph.datasets["bronze_b"]
    assert (b.comment, b.partition_cols, dict(b.table_properties)) == (
        "raw b", ("day",), {"delta.appendOnly": "true"})
    assert graph.flows["bronze_b"].target == "bronze_b"
    assert graph.flows["bronze_a"].location.file.endswith("test_definitions.py")
    assert whatever() is None  # the decorator returns the function unchanged


def test_decorating_outside_a_pipeline_is_a_clear_error() -> None:
    with pytest.raises(GraphError, match="only be used in a definition file loaded by deltaflow"):
        @dp.table
        def orphan():  # type: ignore[no-untyped-def]
            return None


def test_reading_a_source_at_import_time_is_a_clear_error() -> None:
    with pytest.raises(GraphError, match="no active pipeline"):
        dp.read_kafka("clicks")


def project(tmp_path: Path, code: str) -> Path:
    (tmp_path / "transformations").mkdir()
    (tmp_path / "transformations" / "defs.py").write_text(code)
    spec_file = tmp_path / "deltaflow.yml"
    spec_file.write_text("name: p\nstorage: s\nlibraries: [transformations/*.py]\n")
    return spec_file


def test_duplicate_table_names_both_locations(tmp_path: Path) -> None:
    spec_file = project(tmp_path, "import deltaflow as dp\n\n@dp.table\ndef t():\n    pass\n\n\n"
                        "@dp.table(name='t')\ndef u():\n    pass\n")
    with pytest.raises(GraphError) as info:
        Pipeline(parse_spec(spec_file.read_text(), spec_file, env={})).graph  # noqa: B018
    assert "dataset 't' is defined twice" in str(info.value)
    assert "defs.py:3" in str(info.value) and "defs.py:8" in str(info.value)


def test_a_failing_definition_file_names_its_line(tmp_path: Path) -> None:
    spec_file = project(tmp_path, "import deltaflow as dp\n\nx = 1\nundefined_name + 1\n")
    with pytest.raises(GraphError) as info:
        Pipeline(parse_spec(spec_file.read_text(), spec_file, env={})).graph  # noqa: B018
    assert "defs.py:4" in str(info.value) and "NameError" in str(info.value)


def test_libraries_glob_that_matches_nothing(tmp_path: Path) -> None:
    spec_file = tmp_path / "deltaflow.yml"
    spec_file.write_text("name: p\nstorage: s\nlibraries: [transfromations/*.py]\n")
    with pytest.raises(GraphError, match=r"'transfromations/\*\.py' matches no \.py or \.sql file"):
        Pipeline(parse_spec(spec_file.read_text(), spec_file, env={})).graph  # noqa: B018


def test_definition_files_import_without_spark(tmp_path: Path) -> None:
    spec_file = project(tmp_path, "import deltaflow as dp\n\n@dp.table\ndef t():\n"
                        "    return spark.readStream.table('x')\n")
    graph = Pipeline(parse_spec(spec_file.read_text(), spec_file, env={})).graph
    assert list(graph.flows) == ["t"]
