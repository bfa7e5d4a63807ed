"""``deltaflow init`` and ``deltaflow schema`` (issue 42), without Spark: what a new project holds, that a
folder in use is refused with nothing overwritten, and that the shipped JSON Schema is the model's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deltaflow.cli.main import invoke
from deltaflow.commands.init import init_project
from deltaflow.errors import ConfigError
from deltaflow.examples import example_names
from deltaflow.pipeline import Pipeline
from deltaflow.spec import json_schema, load_spec

SHIPPED = Path(__file__).resolve().parents[2] / "src" / "deltaflow" / "deltaflow.schema.json"


def test_a_new_project_has_a_spec_with_its_schema_a_starter_sample_input_and_a_readme(tmp_path: Path) -> None:
    folder = tmp_path / "shop"
    written = {str(p.relative_to(folder)) for p in init_project(folder)}
    assert written == {"deltaflow.yml", "deltaflow.schema.json", "transformations/pipeline.py",
                       "landing/events-0001.json", "README.md", ".gitignore"}
    spec_text = (folder / "deltaflow.yml").read_text()
    assert spec_text.startswith("# yaml-language-server: $schema=deltaflow.schema.json\n")
    assert json.loads((folder / "deltaflow.schema.json").read_text()) == json_schema()
    spec = load_spec(folder, env={})
    assert (spec.name, spec.storage_path) == ("shop", str(folder / "data"))
    graph = Pipeline(spec).graph  # the starter loads without Spark
    assert {n: d.kind for n, d in graph.datasets.items()} == {
        "bronze_events": "table", "silver_events": "table", "gold_actions": "materialized_view"}
    assert "data/" in (folder / ".gitignore").read_text().splitlines()
    readme = (folder / "README.md").read_text()
    assert all(command in readme for command in ("deltaflow dry-run", "deltaflow run --available-now",
                                                 "deltaflow status"))


def test_a_folder_that_is_not_empty_is_refused_in_one_line_and_nothing_is_overwritten(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "deltaflow.yml").write_text("mine\n")
    code = invoke(["init", str(tmp_path)])
    line = capsys.readouterr().err.strip()
    assert code == 1 and "\n" not in line and "is not empty (deltaflow.yml)" in line and "--force" in line
    assert (tmp_path / "deltaflow.yml").read_text() == "mine\n" and sorted(tmp_path.iterdir()) == [
        tmp_path / "deltaflow.yml"]
    (tmp_path / "notes.txt").write_text("keep\n")
    assert invoke(["init", str(tmp_path), "--force"]) == 0
    assert (tmp_path / "deltaflow.yml").read_text().startswith("# yaml-language-server")
    assert (tmp_path / "notes.txt").read_text() == "keep\n"  # --force leaves other files alone


@pytest.mark.parametrize("example", ["orders", "sdp_orders"])
def test_a_project_can_start_from_a_shipped_example(tmp_path: Path, example: str) -> None:
    folder = tmp_path / example
    init_project(folder, example=example)
    spec = load_spec(folder, env={})
    assert spec.name == example and Pipeline(spec).graph.datasets
    if example == "orders":
        assert (folder / "deltaflow.yml").read_text().startswith("# yaml-language-server: $schema=")


def test_an_unknown_example_names_the_ones_there_are(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"example 'order' not found.*examples: clickstream, customers_cdc"):
        init_project(tmp_path / "x", example="order")
    assert not (tmp_path / "x").exists()
    assert {"clickstream", "orders", "sdp_orders"} <= set(example_names())


def test_the_shipped_json_schema_is_the_models_and_deltaflow_schema_prints_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert json.loads(SHIPPED.read_text()) == json_schema(), "regenerate: deltaflow schema > " + str(SHIPPED)
    assert invoke(["schema"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json_schema()
    assert printed["required"] == ["name", "storage"]
    trigger = printed["$defs"]["TriggerSpec"]["properties"]
    assert trigger["mode"]["enum"] == ["available_now", "continuous", "once"]
    assert trigger["mode"]["description"].startswith("available_now: process what is there")
