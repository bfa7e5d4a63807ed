"""Registration of every dataset kind and the graph checks that need no Spark."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import deltaflow as dp
from deltaflow.define.datasets import registering
from deltaflow.define.graph import PipelineGraph, WindowRefresh
from deltaflow.errors import ConfigError, GraphError
from deltaflow.pipeline import Pipeline
from deltaflow.runtime.triggers import Trigger, flow_triggers
from deltaflow.spec import parse_spec


def test_each_kind_registers_bare_and_with_arguments() -> None:
    graph = PipelineGraph()
    with registering(graph):
        @dp.materialized_view
        def daily():  # type: ignore[no-untyped-def]
            return None

        @dp.materialized_view(name="hourly", refresh=dp.by_window("ts", "1 hour"))
        def anything():  # type: ignore[no-untyped-def]
            return None

        @dp.temporary_view
        def parsed():  # type: ignore[no-untyped-def]
            return None

        dp.create_streaming_table("all_clicks", schema="id STRING", partition_cols=["day"])

        @dp.append_flow(target="all_clicks")
        def web():  # type: ignore[no-untyped-def]
            return None

        @dp.append_flow(target="all_clicks", name="mobile")
        def other():  # type: ignore[no-untyped-def]
            return None

    kinds = {name: d.kind for name, d in graph.datasets.items()}
    assert kinds == {"daily": "materialized_view", "hourly": "materialized_view",
                     "parsed": "temporary_view", "all_clicks": "table"}
    assert graph.datasets["hourly"].refresh == WindowRefresh("ts", "1 hour", "window.start")
    assert graph.datasets["daily"].refresh is None
    assert [f.name for f in graph.flows_into("all_clicks")] == ["web", "mobile"]
    assert graph.datasets["all_clicks"].schema == "id STRING"
    assert graph.datasets["all_clicks"].partition_cols == ("day",)
    # create_streaming_table is located at its call, not inside deltaflow
    assert graph.datasets["all_clicks"].location.file.endswith("test_graph_api.py")
    assert not graph.datasets["parsed"].stored
    graph.validate()


def project(tmp_path: Path, code: str, spec_extra: str = "") -> Path:
    (tmp_path / "transformations").mkdir()
    (tmp_path / "transformations" / "defs.py").write_text(code)
    spec_file = tmp_path / "deltaflow.yml"
    spec_file.write_text(f"name: p\nstorage: s\nlibraries: [transformations/*.py]\n{spec_extra}")
    return spec_file


def load(spec_file: Path) -> PipelineGraph:
    return Pipeline(parse_spec(spec_file.read_text(), spec_file, env={})).graph


def test_append_flow_to_an_unknown_table_suggests_the_name(tmp_path: Path) -> None:
    spec_file = project(tmp_path, "import deltaflow as dp\ndp.create_streaming_table('all_clicks')\n\n"
                        "@dp.append_flow(target='all_click')\ndef web():\n    pass\n")
    with pytest.raises(GraphError) as info:
        load(spec_file)
    message = str(info.value)
    assert "unknown dataset 'all_click' (did you mean 'all_clicks'?)" in message
    assert "defs.py:4" in message


def test_a_streaming_table_nobody_writes_is_an_error_at_its_line(tmp_path: Path) -> None:
    spec_file = project(tmp_path, "import deltaflow as dp\n\ndp.create_streaming_table('lonely')\n")
    with pytest.raises(GraphError, match=r"defs\.py:3: streaming table 'lonely' has no flow"):
        load(spec_file)


def test_append_flow_into_a_materialized_view_is_refused(tmp_path: Path) -> None:
    spec_file = project(tmp_path, "import deltaflow as dp\n\n@dp.materialized_view\ndef mv():\n    pass\n\n"
                        "@dp.append_flow(target='mv')\ndef extra():\n    pass\n")
    with pytest.raises(GraphError, match="flows only write to streaming tables and sinks"):
        load(spec_file)


def test_append_flow_needs_a_target(tmp_path: Path) -> None:
    spec_file = project(tmp_path, "import deltaflow as dp\n\n@dp.append_flow\ndef web():\n    pass\n")
    with pytest.raises(GraphError, match="needs target="):
        load(spec_file)


def test_per_flow_trigger_overrides(tmp_path: Path) -> None:
    spec_file = project(tmp_path, "", "trigger:\n  mode: continuous\n  interval: 5 seconds\n  flows:\n"
                        "    gold: {interval: 5 minutes}\n    side: {mode: available_now}\n")
    spec = parse_spec(spec_file.read_text(), spec_file, env={})
    base = Trigger("continuous", "5 seconds")
    triggers = flow_triggers(spec, ["bronze", "gold", "side"], base, mode_given=False)
    assert triggers == {"gold": Trigger("continuous", "5 minutes"),
                        "side": Trigger("available_now", "5 seconds")}
    # a mode given on the command line wins over per-flow modes, not over per-flow intervals
    forced = flow_triggers(spec, ["bronze", "gold", "side"], Trigger("once"), mode_given=True)
    assert forced["side"].mode == "once" and forced["gold"] == Trigger("once", "5 minutes")
    with pytest.raises(ConfigError, match="unknown flow 'gold' "):
        flow_triggers(spec, ["bronze", "side", "golden"], base, mode_given=False)


CDC_FLOW = """import deltaflow as dp

@dp.table
def changes():
    pass

dp.create_streaming_table("target")
dp.create_auto_cdc_flow(target="target", source="changes", keys=["id"], sequence_by={sequence}{extra})
"""


def test_auto_cdc_flow_registers_its_options_at_its_line(tmp_path: Path) -> None:
    graph = load(project(tmp_path, CDC_FLOW.format(
        sequence='["ts", "n"]', extra=', apply_as_deletes="op = \'D\'", except_column_list=["op"], '
        'stored_as_scd_type="2", track_history_column_list=["name"], name="history"')))
    flow = graph.flows["history"]
    assert flow.target == "target" and str(flow.location).endswith("defs.py:8")
    assert flow.cdc is not None
    assert (flow.cdc.keys, flow.cdc.sequence_by, flow.cdc.scd_type) == (("id",), ("ts", "n"), 2)
    assert flow.cdc.apply_as_deletes == "op = 'D'" and flow.cdc.except_column_list == ("op",)
    assert flow.cdc.track_history_column_list == ("name",)


@pytest.mark.parametrize(("sequence", "extra", "message"), [
    ('"ts"', ", stored_as_scd_type=3", "stored_as_scd_type must be 1 or 2, not 3"),
    ('"ts"', ", stored_as_scd_type=2, apply_as_truncates='op = \"T\"'", "apply_as_truncates works with "
     "stored_as_scd_type=1 only"),
    ("42", "", "sequence_by must name columns"),
])
def test_auto_cdc_flow_mistakes_are_one_line_errors(tmp_path: Path, sequence: str, extra: str,
                                                    message: str) -> None:
    with pytest.raises(GraphError, match=rf"defs\.py:8: {message}"):
        load(project(tmp_path, CDC_FLOW.format(sequence=sequence, extra=extra)))


def test_auto_cdc_and_append_flows_do_not_mix_in_one_table(tmp_path: Path) -> None:
    code = CDC_FLOW.format(sequence='"ts"', extra="") + (
        "\n@dp.append_flow(target='target')\ndef more():\n    pass\n")
    with pytest.raises(GraphError, match=r"defs\.py:7: streaming table 'target' mixes auto CDC and append"):
        load(project(tmp_path, code))


def test_one_auto_cdc_flow_per_table(tmp_path: Path) -> None:
    code = CDC_FLOW.format(sequence='"ts"', extra="") + (
        'dp.create_auto_cdc_flow(target="target", source="changes", keys=["id"], sequence_by="ts", '
        'name="again")\n')
    with pytest.raises(GraphError, match=r"defs\.py:9: streaming table 'target' has 2 auto CDC flows "
                       r"\(target, again\); one writes it"):
        load(project(tmp_path, code))


def test_foreach_batch_sink_takes_append_flows(tmp_path: Path) -> None:
    graph = load(project(tmp_path, "import deltaflow as dp\n\n@dp.foreach_batch_sink(name='out')\n"
                         "def write(df, batch_id):\n    pass\n\n@dp.append_flow(target='out')\n"
                         "def feed():\n    pass\n"))
    sink = graph.datasets["out"]
    assert sink.kind == "sink" and not sink.stored and sink.runs and sink.handler is not None
    assert [f.name for f in graph.flows_into("out")] == ["feed"]


@pytest.mark.parametrize("name", ["../escape", "a/b", "..", "_event_log", "a.b", "x\\y"])
def test_a_name_that_could_leave_its_folder_is_refused_at_its_definition(name: str) -> None:
    graph = PipelineGraph()
    refusal = re.escape(f"name '{name}' is not allowed")
    with registering(graph), pytest.raises(GraphError, match=refusal) as refused:
        @dp.table(name=name)
        def anything():  # type: ignore[no-untyped-def]
            return None
    assert "test_graph_api.py:" in str(refused.value) and not graph.datasets
    with registering(PipelineGraph()), pytest.raises(GraphError, match="flow name"):
        dp.create_streaming_table("ok_table")

        @dp.append_flow(target="ok_table", name=name)
        def other():  # type: ignore[no-untyped-def]
            return None
