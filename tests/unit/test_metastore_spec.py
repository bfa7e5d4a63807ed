"""The spec's ``metastore:``: the Spark settings a run's session gets, embedded or a service."""

from __future__ import annotations

from pathlib import Path

import pytest

from deltaflow.errors import ConfigError
from deltaflow.runtime.metastore import database_of, derby_log_option, metastore_conf
from deltaflow.spec import parse_spec
from deltaflow.storage import StorageLayout


def spec_of(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "deltaflow.yml"
    path.write_text(text)
    return parse_spec(text, path, env={})


def test_an_embedded_metastore_is_derby_under_storage_with_its_log_beside_it(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, "name: my-shop\nstorage: data\nmetastore: {}\n")
    layout = StorageLayout.of(spec)
    conf = metastore_conf(spec, layout)
    assert conf == {"spark.sql.catalogImplementation": "hive", "spark.hadoop.javax.jdo.option.ConnectionURL":
                    f"jdbc:derby:;databaseName={tmp_path}/data/_metastore/db;create=true"}
    log = f"{tmp_path}/data/_metastore/derby.log"
    assert derby_log_option(spec, layout) == f" -Dderby.stream.error.file={log}"
    assert (tmp_path / "data" / "_metastore").is_dir()  # Derby opens its log before its database
    assert database_of(spec) == "my_shop"


def test_a_metastore_service_is_its_uri_and_an_embedded_one_needs_local_storage(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, "name: shop\nstorage: data\nmetastore: {uri: 'thrift://127.0.0.1:9083', "
                   "database: sales}\n")
    assert metastore_conf(spec, StorageLayout.of(spec)) == {
        "spark.sql.catalogImplementation": "hive", "spark.hadoop.hive.metastore.uris": "thrift://127.0.0.1:9083"}
    assert derby_log_option(spec, StorageLayout.of(spec)) == "" and database_of(spec) == "sales"
    on_s3 = spec_of(tmp_path, "name: shop\nstorage: s3a://lake/shop\nmetastore: {}\n")
    with pytest.raises(ConfigError, match="an embedded metastore needs storage on the local disk"):
        metastore_conf(on_s3, StorageLayout.of(on_s3))
    with pytest.raises(ConfigError, match=r"metastore\.uri"):
        spec_of(tmp_path, "name: shop\nstorage: data\nmetastore: {uri: 'http://x:1'}\n")
    assert metastore_conf(spec_of(tmp_path, "name: shop\nstorage: data\n"), StorageLayout.of(spec)) == {}


def test_a_registration_that_fails_at_the_runs_end_is_said_not_raised(tmp_path: Path) -> None:
    from deltaflow.runtime.metastore import Registration

    spec = spec_of(tmp_path, "name: shop\nstorage: data\nmetastore: {uri: 'thrift://127.0.0.1:9083'}\n")
    said: list[str] = []
    registration = Registration(None, spec, StorageLayout.of(spec), ["gold"], said.append)  # type: ignore[arg-type]

    class Gone:
        uri = "thrift://127.0.0.1:9083"

        def register(self, tables: object) -> list[str]:
            raise ConnectionError("the metastore went away")

    registration.registry = Gone()  # type: ignore[assignment]
    registration.finish()  # the run's outcome stands
    assert said == ["metastore thrift://127.0.0.1:9083: not every table registered: the metastore went away"]
