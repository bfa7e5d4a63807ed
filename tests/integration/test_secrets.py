"""Secrets stay secret: a run whose spec takes Kafka SASL and object-store keys from ``${ENV}`` shows none.

Every line the run prints (Spark's own log at INFO included), every event-log row, the graph record, the
errors of a flow that fails, and the ``--json`` output of the read verbs are searched for the secret values.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from helpers import cli, cli_env

pytestmark = pytest.mark.slow

DEFS = """
import deltaflow as dp

@dp.table
def bronze():
    return dp.read_kafka("{topic}")

@dp.table
@dp.expect_or_fail("small", "amount < 100")
def silver():
    return dp.parse_json(spark.readStream.table("bronze"), "order_id STRING, amount DOUBLE")
"""


def test_no_secret_in_any_output(spark, kafka_bootstrap: str, s3_root: str, s3_endpoint: str, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    from deltalake import DeltaTable

    from deltaflow.dev.generator import produce
    from deltaflow.dev.topics import create_topic
    from deltaflow.spec import load_spec
    from deltaflow.storage import StorageLayout

    token = uuid.uuid4().hex[:10]
    secrets = {"TEST_SASL_PASSWORD": f"sasl-pw-{token}", "TEST_S3_ACCESS": f"access-{token}",
               "TEST_S3_SECRET": f"secret-{token}"}
    topic = f"secrets-{token}"
    create_topic(kafka_bootstrap, topic)
    produce(kafka_bootstrap, topic, [{"order_id": f"o{i}", "amount": float(i)} for i in range(20)]
            + [{"order_id": "big", "amount": 500.0}])  # silver fails on it: its error is searched too
    root = tmp_path / "p"
    (root / "transformations").mkdir(parents=True)
    (root / "transformations" / "defs.py").write_text(DEFS.format(topic=topic))
    (root / "deltaflow.yml").write_text(
        f"name: secrets\nstorage: {s3_root}\nlibraries: [transformations/*.py]\n"
        f"kafka:\n  bootstrap_servers: {kafka_bootstrap}\n"
        "  options:\n"  # PLAINTEXT: the client has the SASL settings, the broker never asks for them
        "    security.protocol: PLAINTEXT\n"
        "    sasl.mechanism: PLAIN\n"
        "    sasl.jaas.config: 'org.apache.kafka.common.security.plain.PlainLoginModule required "
        "username=\"u\" password=\"${TEST_SASL_PASSWORD}\";'\n"
        f"s3: {{endpoint: '{s3_endpoint}', access_key: '${{TEST_S3_ACCESS}}', "
        "secret_key: '${TEST_S3_SECRET}', path_style: true}\n")
    env = {**cli_env(), **secrets}
    run = subprocess.run([sys.executable, "-m", "deltaflow", "-v", "run", "--available-now", "--spec",
                          str(root)], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 1 and "'silver'" in run.stderr and "small" in run.stderr, run.stderr[-3000:]
    outputs = {"run (stdout, stderr with Spark's INFO log)": run.stdout + run.stderr}

    with pytest.MonkeyPatch.context() as env_patch:
        for name, value in secrets.items():
            env_patch.setenv(name, value)
        for verb in (["status", "--json"], ["dry-run", "--json"], ["history", "bronze", "--json"],
                     ["quarantine", "silver", "--json"]):
            shown = cli(capsys, *verb, "--spec", str(root))
            outputs[" ".join(verb)] = shown.stdout + shown.stderr
        spec = load_spec(root / "deltaflow.yml")
        layout = StorageLayout.of(spec)
        log = DeltaTable(layout.event_log, storage_options=layout.storage_options).to_pyarrow_table()
        outputs["event log"] = json.dumps(log.to_pylist(), default=str)
        outputs["graph record"] = layout.fs.read_text(layout.graph_record) or ""
    assert '"kind": "failed"' in outputs["event log"] and outputs["status --json"].count('"flow"') == 2
    for what, text in outputs.items():
        for name, value in secrets.items():
            assert value not in text, f"{name} appears in {what}"
