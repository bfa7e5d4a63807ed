from __future__ import annotations

import os
from pathlib import Path

import pytest

from deltaflow.errors import ConfigError
from deltaflow.spec import find_spec, load_spec, parse_spec
from helpers import cli

P = Path("pipe/deltaflow.yml")


def error_of(text: str, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        parse_spec(text, P, env=env or {})
    message = str(info.value)
    assert "\n" not in message
    return message


def test_minimal_spec_gets_defaults() -> None:
    spec = parse_spec("name: p\nstorage: ./data\n", Path("/x/deltaflow.yml"), env={})
    assert spec.libraries == ["transformations/**"]  # the starter's: every .py and .sql file under it
    assert spec.trigger.mode == "available_now"
    assert spec.storage_path == "/x/data"
    assert spec.kafka.bootstrap_servers == "127.0.0.1:19092"


def test_misspelt_top_level_key_names_file_key_and_suggestion() -> None:
    message = error_of("name: p\nstorage: s\nkafak:\n  bootstrap_servers: h:1\n")
    assert "pipe/deltaflow.yml" in message
    assert "unknown key 'kafak'" in message
    assert "did you mean 'kafka'" in message


def test_misspelt_nested_key_names_its_section() -> None:
    message = error_of("name: p\nstorage: s\ntrigger:\n  intervall: 5 seconds\n")
    assert "unknown key 'intervall' in 'trigger'" in message
    assert "'interval'" in message


def test_missing_storage_and_bad_values() -> None:
    assert "missing required key 'storage'" in error_of("name: p\n")
    assert "trigger.mode" in error_of("name: p\nstorage: s\ntrigger: {mode: sometimes}\n")
    assert "'soon' is not a duration" in error_of("name: p\nstorage: s\ntrigger: {interval: soon}\n")


def test_yaml_syntax_error_names_the_line() -> None:
    message = error_of("name: p\nstorage: s\nlibraries: [a\n")
    assert "pipe/deltaflow.yml:" in message and "invalid YAML" in message


def test_env_references_are_substituted_and_redacted() -> None:
    text = ("name: p\nstorage: ${STORE:-/tmp/default}\nkafka:\n  bootstrap_servers: ${BOOT}\n"
            "  options:\n    sasl.password: ${PASSWORD}\n")
    spec = parse_spec(text, P, env={"BOOT": "b:9092", "PASSWORD": "hunter2"})
    assert spec.storage == "/tmp/default"
    assert spec.kafka.bootstrap_servers == "b:9092"
    assert spec.kafka.options["sasl.password"] == "hunter2"
    shown = spec.redacted()
    assert shown["kafka"]["options"]["sasl.password"] == "***"
    assert "hunter2" not in repr(shown)


def test_missing_env_var_names_field_and_variable_not_value() -> None:
    message = error_of("name: p\nstorage: s\nkafka:\n  options:\n    sasl.password: ${PASSWORD}\n")
    assert "PASSWORD is not set" in message
    assert "kafka.options.sasl.password" in message


def test_configuration_splits_spark_conf_from_parameters() -> None:
    spec = parse_spec("name: p\nstorage: s\nconfiguration:\n  spark.sql.shuffle.partitions: 4\n"
                      "  topic: clicks\n", P, env={})
    assert spec.spark_conf == {"spark.sql.shuffle.partitions": "4"}
    assert spec.parameters == {"topic": "clicks"}


def test_find_spec_walks_up_from_a_subfolder(tmp_path: Path) -> None:
    (tmp_path / "deltaflow.yml").write_text("name: p\nstorage: s\n")
    sub = tmp_path / "transformations" / "deep"
    sub.mkdir(parents=True)
    assert find_spec(start=sub) == tmp_path / "deltaflow.yml"
    assert load_spec(tmp_path).name == "p"
    with pytest.raises(ConfigError, match=r"no deltaflow\.yml \(or spark-pipeline\.yml\) in folder"):
        find_spec(tmp_path / "transformations")


def test_cli_reports_misspelt_key_in_one_line_and_exits_nonzero(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "deltaflow.yml").write_text("name: p\nstorage: s\ntriger:\n  mode: once\n")
    proc = cli(capsys, "run", "--spec", str(tmp_path))
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "unknown key 'triger'" in lines[0] and "deltaflow.yml" in lines[0]
    assert "did you mean 'trigger'" in lines[0]


def test_maintenance_block_is_off_by_default_and_checks_its_durations_and_keys() -> None:
    assert not parse_spec("name: p\nstorage: s\n", P, env={}).maintenance.optimize_every
    spec = parse_spec("name: p\nstorage: s\nmaintenance:\n  optimize_every: 50\n  vacuum_every: 1 day\n"
                      "  zorder: {silver: [sensor_id]}\n", P, env={})
    assert (spec.maintenance.optimize_every, spec.maintenance.zorder) == (50, {"silver": ["sensor_id"]})
    assert "maintenance.vacuum_every: 'daily' is not a duration" in error_of(
        "name: p\nstorage: s\nmaintenance:\n  vacuum_every: daily\n")
    block = "name: p\nstorage: s\nmaintenance:\n  "
    assert "maintenance.optimize_every" in error_of(block + "optimize_every: -1\n")
    assert "did you mean 'optimize_every'" in error_of(block + "optimise_every: 5\n")


def test_only_a_small_run_has_its_jvm_compile_for_a_quick_start() -> None:
    from deltaflow.runtime.session import SMALL_RUN_JIT, default_conf

    assert SMALL_RUN_JIT in default_conf(small_run=True)["spark.driver.extraJavaOptions"]
    assert "TieredStopAtLevel" not in default_conf()["spark.driver.extraJavaOptions"]


def test_only_a_local_master_swaps_hadoops_local_file_system_and_a_specs_own_settings_win() -> None:
    from deltaflow.runtime.jars import driver_class_path
    from deltaflow.runtime.session import in_process_local_files

    local = in_process_local_files({"spark.master": "local[2]"})
    assert local["spark.hadoop.fs.AbstractFileSystem.file.impl"] == "io.deltaflow.storage.InProcessLocalFs"
    assert local["spark.driver.extraClassPath"] == str(driver_class_path())
    cluster = in_process_local_files({"spark.master": "spark://127.0.0.1:7077",
                                      "spark.driver.extraClassPath": "x.jar"})
    assert "spark.hadoop.fs.file.impl" not in cluster  # the executors do not have the class
    assert "spark.hadoop.fs.file.impl" not in in_process_local_files({"spark.master": "local-cluster[2,1,9]"})
    assert cluster["spark.driver.extraClassPath"] == f"{driver_class_path()}{os.pathsep}x.jar"
    own = {"spark.master": "local", "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.LocalFileSystem"}
    assert in_process_local_files(own)["spark.hadoop.fs.file.impl"] == "org.apache.hadoop.fs.LocalFileSystem"


def test_every_problem_of_a_spec_is_on_its_one_line() -> None:
    message = error_of("nmae: p\nstorage: s\ntigger: 5\nkafak: {}\n")
    assert "\n" not in message
    assert message.index("missing required key 'name'") < message.index("; also: ")
    for problem in ("unknown key 'nmae' (did you mean 'name'?)", "unknown key 'tigger' (did you mean "
                    "'trigger'?)", "unknown key 'kafak' (did you mean 'kafka'?)"):
        assert problem in message


def test_a_misspelt_parameter_gets_the_closest_one() -> None:
    import deltaflow as dp
    from deltaflow.define.context import PipelineContext, activate
    from deltaflow.errors import ConfigError

    text = "name: p\nstorage: s\nconfiguration:\n  landing: in/\n"
    spec = parse_spec(text, Path("/x/deltaflow.yml"), env={})
    with activate(PipelineContext(spark=None, spec=spec)):  # type: ignore[arg-type]
        assert dp.parameter("landing") == "in/"
        with pytest.raises(ConfigError, match=r"'landng' is not set \(did you mean 'landing'\?\)$"):
            dp.parameter("landng")


def test_the_default_libraries_find_every_definition_under_transformations(tmp_path: Path) -> None:
    from deltaflow.define.loader import definition_files

    (tmp_path / "transformations" / "sql").mkdir(parents=True)
    for name in ("a.py", "sql/b.sql", "notes.txt"):
        (tmp_path / "transformations" / name).write_text("")
    spec = parse_spec("name: p\nstorage: ./data\n", tmp_path / "deltaflow.yml", env={})
    assert [p.relative_to(tmp_path).as_posix() for p in definition_files(spec)] == [
        "transformations/a.py", "transformations/sql/b.sql"]
