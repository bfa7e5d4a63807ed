"""The pipeline spec, ``deltaflow.yml``: model, discovery, ``${ENV}`` substitution and strict validation.

Example ``deltaflow.yml``::

    name: clickstream
    storage: ./data                     # tables, checkpoints and logs; relative to this file
    libraries: [transformations/**]     # every .py and .sql file under transformations/
    configuration:
      spark.sql.shuffle.partitions: "4" # any spark.* key goes to the SparkSession
      source_topic: clicks              # anything else is a pipeline parameter (dp.parameter)
    table_properties:                   # Delta table properties of every table (a table's own win)
      delta.enableChangeDataFeed: true
    kafka:
      bootstrap_servers: ${KAFKA_BOOTSTRAP:-127.0.0.1:19092}
      options: {sasl.password: ${KAFKA_PASSWORD}}   # secret: never printed
    trigger:
      mode: continuous
      interval: 5 seconds
      flows: {gold_daily_sales: {interval: 5 minutes}}   # per-flow override
    s3:                                 # for storage: s3a://bucket/prefix (see S3Spec)
      endpoint: ${S3_ENDPOINT:-http://127.0.0.1:19000}
      access_key: ${AWS_ACCESS_KEY_ID}
      secret_key: ${AWS_SECRET_ACCESS_KEY}
      path_style: true
    lease: {ttl: 30 seconds}            # how long a crashed run keeps the tables it wrote
    maintenance:                        # carried out by every run, beside the flows
      optimize_every: 100               # compact a table after this many batches written to it
      zorder: {silver_clicks: [user_id]}
      vacuum_every: 1 day               # stream-aware VACUUM of every table, keeping its own retention

Examples:
    >>> from pathlib import Path
    >>> spec = load_spec(Path("examples/clickstream"))  # doctest: +SKIP
    >>> spec.name
    'clickstream'

"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field, PrivateAttr, ValidationError, field_validator

from deltaflow.errors import ConfigError
from deltaflow.sdp.spec import SDP_SPEC_NAMES, sdp_keys
from deltaflow.spec.sections import (
    FlowTriggerSpec,
    KafkaSpec,
    LeaseSpec,
    MaintenanceSpec,
    MetastoreSpec,
    S3Spec,
    Strict,
    TriggerMode,
    TriggerSpec,
)

__all__ = ["FlowTriggerSpec", "KafkaSpec", "LeaseSpec", "MaintenanceSpec", "MetastoreSpec", "S3Spec", "Spec",
           "TriggerMode", "TriggerSpec", "find_spec", "json_schema", "load_spec", "parse_spec"]

#: The spec's file names, looked for in this order (Spark Declarative Pipelines' last: deltaflow.sdp.spec).
SPEC_NAMES = ("deltaflow.yml", "deltaflow.yaml", *SDP_SPEC_NAMES)
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
REDACTED = "***"
_ALWAYS_SECRET = frozenset({"s3.access_key", "s3.secret_key"})


class Spec(Strict):
    """A validated ``deltaflow.yml``. Build it with :func:`load_spec`."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_\-]*$", description="The pipeline's name.",
                      examples=["clickstream"])
    storage: str = Field(description="Where tables, checkpoints and logs live: a folder (relative to this "
                         "file) or s3a://bucket/prefix.", examples=["./data", "s3a://lake/clickstream"])
    libraries: list[str] = Field(default_factory=lambda: ["transformations/**"], description="Glob "
                                 "patterns of the definition files (.py and .sql), relative to this file; "
                                 "'dir/**' is every .py and .sql file under dir.",
                                 examples=[["transformations/*.py", "sql/*.sql"]])
    configuration: dict[str, str] = Field(
        default_factory=dict, description="spark.* keys go to the SparkSession; every key is also a Spark "
        "setting of the session and a pipeline parameter (dp.parameter, spark.conf.get).",
        examples=[{"spark.sql.shuffle.partitions": "4", "source_topic": "clicks"}])
    table_properties: dict[str, str] = Field(
        default_factory=dict, description="Delta table properties of every table (a table's own win).",
        examples=[{"delta.enableChangeDataFeed": "true"}])
    kafka: KafkaSpec = Field(default_factory=KafkaSpec, description=KafkaSpec.__doc__)
    trigger: TriggerSpec = Field(default_factory=TriggerSpec, description=TriggerSpec.__doc__)
    maintenance: MaintenanceSpec = Field(default_factory=MaintenanceSpec,
                                         description=(MaintenanceSpec.__doc__ or "").split("\n")[0])
    s3: S3Spec | None = Field(default=None, description=(S3Spec.__doc__ or "").split("\n")[0])
    lease: LeaseSpec = Field(default_factory=LeaseSpec, description=LeaseSpec.__doc__)
    metastore: MetastoreSpec | None = Field(default=None,
                                            description=(MetastoreSpec.__doc__ or "").split("\n")[0])

    _path: Path | None = PrivateAttr(default=None)
    _secrets: frozenset[str] = PrivateAttr(default=frozenset())
    _unset: dict[str, str] = PrivateAttr(default_factory=dict)
    _notes: list[str] = PrivateAttr(default_factory=list)

    @field_validator("configuration", "table_properties", mode="before")
    @classmethod
    def _stringify(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {str(k): _scalar_text(v) for k, v in value.items()}
        return value

    @property
    def path(self) -> Path | None:
        """The file this spec was read from (None when built in code)."""
        return self._path

    @property
    def root(self) -> Path:
        """The folder relative paths in the spec are resolved against."""
        return self._path.parent if self._path else Path.cwd()

    @property
    def storage_path(self) -> str:
        """``storage`` as an absolute path, or the URI unchanged (``s3a://...``)."""
        if "://" in self.storage:
            return self.storage.rstrip("/")
        return str((self.root / self.storage).resolve())

    @property
    def spark_conf(self) -> dict[str, str]:
        """The ``spark.*`` entries of ``configuration``."""
        return {k: v for k, v in self.configuration.items() if k.startswith("spark.")}

    @property
    def parameters(self) -> dict[str, str]:
        """The entries of ``configuration`` that are not Spark settings."""
        return {k: v for k, v in self.configuration.items() if not k.startswith("spark.")}

    def is_secret(self, dotted: str) -> bool:
        """True when the value at ``dotted`` (e.g. ``kafka.options.sasl.password``) came from ``${ENV}``."""
        return dotted in self._secrets or dotted in _ALWAYS_SECRET

    def unset_under(self, section: str) -> str | None:
        """Why ``section`` (e.g. ``kafka``) cannot be used by a reading verb: its first unset ``${VAR}``.

        Examples:
            >>> spec.unset_under("kafka")  # doctest: +SKIP
            'environment variable KAFKA_PASSWORD is not set (kafka.options.sasl.password)'

        """
        for field, var in self._unset.items():
            if field == section or field.startswith(f"{section}."):
                return f"environment variable {var} is not set ({field})"
        return None

    @property
    def notes(self) -> list[str]:
        """What deltaflow does differently from what the spec asks (SDP's catalog, say)."""
        return list(self._notes)

    @property
    def kafka_to_read(self) -> KafkaSpec | None:
        """The Kafka settings, unless one of them is an unset ``${VAR}`` (a verb that only reads)."""
        return None if self.unset_under("kafka") else self.kafka

    def redacted(self) -> dict[str, Any]:
        """The spec as a dict, safe to print: values that came from ``${ENV}`` are replaced by ``***``."""
        shown: dict[str, Any] = _redact(self.model_dump(), self._secrets | _ALWAYS_SECRET, "")
        return shown


def _scalar_text(value: Any) -> Any:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return str(value)
    return value


def _redact(node: Any, secrets: frozenset[str], prefix: str) -> Any:
    if isinstance(node, dict):
        return {k: _redact(v, secrets, f"{prefix}{k}.") for k, v in node.items()}
    return REDACTED if prefix[:-1] in secrets else node


def find_spec(given: Path | None = None, start: Path | None = None) -> Path:
    """Locate the spec: ``given`` (a file or a folder holding one), else the nearest one upward.

    Raises:
        ConfigError: No spec file was found.

    """
    if given is not None:
        if given.is_dir():
            for name in SPEC_NAMES:
                if (given / name).is_file():
                    return given / name
            raise ConfigError(f"no {SPEC_NAMES[0]} (or {SPEC_NAMES[2]}) in folder {given}")
        if not given.is_file():
            raise ConfigError(f"spec file {given} does not exist")
        return given
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        for name in SPEC_NAMES:
            if (folder / name).is_file():
                return folder / name
    raise ConfigError(
        f"no {SPEC_NAMES[0]} (or {SPEC_NAMES[2]}) in {here} or any parent folder",
        hint="pass --spec PATH or cd into a pipeline"
    )


def substitute_env(node: Any, path: Path, env: dict[str, str], secrets: set[str], dotted: str = "",
                   unset: dict[str, str] | None = None) -> Any:
    """Replace ``${VAR}`` / ``${VAR:-default}`` in every string of ``node``; record where it happened.

    ``unset``: collect the variables that are not set there (field -> variable), each replaced by an empty
    string, instead of failing on the first.
    """
    if isinstance(node, dict):
        return {k: substitute_env(v, path, env, secrets, f"{dotted}{k}.", unset) for k, v in node.items()}
    if isinstance(node, list):
        return [substitute_env(v, path, env, secrets, f"{dotted}{i}.", unset) for i, v in enumerate(node)]
    if not isinstance(node, str) or "${" not in node:
        return node

    def repl(match: re.Match[str]) -> str:
        var, default = match.group(1), match.group(2)
        if var in env:
            return env[var]
        if default is not None:
            return default
        if unset is not None:
            unset.setdefault(dotted[:-1], var)
            return ""
        raise ConfigError(f"environment variable {var} is not set", location=f"{path}: {dotted[:-1]}")

    secrets.add(dotted[:-1])
    return _ENV_REF.sub(repl, node)


#: What a read verb (status, history, ui...) needs from the spec: where the storage is and how to reach it.
READ_NEEDS = ("name", "storage", "s3")


def parse_spec(text: str, path: Path, env: dict[str, str] | None = None, reading: bool = False) -> Spec:
    """Validate the YAML ``text`` of a spec read from ``path``.

    ``reading``: for a verb that only reads the storage, a ``${VAR}`` that is not set is an error only in
    :data:`READ_NEEDS`; elsewhere (a Kafka password, an S3A key in ``configuration``) it is left empty and
    recorded (:meth:`Spec.unset_under`).

    Raises:
        ConfigError: One line naming the file and the first field at fault.

    """
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"invalid YAML: {problem}", location=where) from None
    if not isinstance(raw, dict):
        raise ConfigError("expected a mapping of keys (name, storage, libraries, ...)", location=str(path))
    secrets: set[str] = set()
    unset: dict[str, str] | None = {} if reading else None
    data = substitute_env(raw, path, dict(os.environ) if env is None else env, secrets, unset=unset)
    data, notes = sdp_keys(data, str(path))
    for field, var in (unset or {}).items():
        if field.split(".")[0] in READ_NEEDS:
            raise ConfigError(f"environment variable {var} is not set", location=f"{path}: {field}")
    try:
        spec = Spec.model_validate(data)
    except ValidationError as exc:
        field = ".".join(str(p) for p in exc.errors()[0]["loc"])
        if unset and field in unset:  # an empty stand-in that does not validate: the variable is the fault
            raise ConfigError(f"environment variable {unset[field]} is not set", location=f"{path}: {field}"
                              ) from None
        raise _config_error(exc, path) from None
    spec._path = path.resolve()
    spec._secrets = frozenset(secrets)
    spec._unset = dict(unset or {})
    spec._notes = notes
    return spec


def load_spec(given: Path | None = None, env: dict[str, str] | None = None, reading: bool = False) -> Spec:
    """Find, read and validate the spec (see :func:`find_spec` for where it is looked for).

    ``env`` holds the values of ``${VAR}`` references (default: the process environment); ``reading``: see
    :func:`parse_spec`.
    """
    path = find_spec(given)
    return parse_spec(path.read_text(), path, env, reading)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of ``deltaflow.yml``, from the model: editors complete and check a spec with it.

    Examples:
        >>> sorted(json_schema()["required"])
        ['name', 'storage']

    """
    schema = Spec.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema, "title": "deltaflow.yml"}


def _config_error(exc: ValidationError, path: Path) -> ConfigError:
    """Every problem pydantic found in the spec, on one line: the first, then ``; also: ...`` the others."""
    problems = [_problem(err) for err in exc.errors()]
    (first, hint), rest = problems[0], problems[1:]
    others = "; ".join(f"{message} ({more})" if more else message for message, more in rest)
    if others:
        first = f"{first}{f' ({hint})' if hint else ''}; also: {others}"
        hint = None
    return ConfigError(first, location=str(path), hint=hint)


def _problem(err: Any) -> tuple[str, str | None]:
    """One validation error in words, and its hint (a key that is close, the keys known)."""
    loc = [str(p) for p in err["loc"]]
    field = ".".join(loc)
    if err["type"] == "extra_forbidden":
        parent = _model_at(loc[:-1])
        close = difflib.get_close_matches(loc[-1], list(parent.model_fields), n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(parent.model_fields)}"
        where = f" in '{'.'.join(loc[:-1])}'" if loc[:-1] else ""
        return f"unknown key '{loc[-1]}'{where}", hint
    if err["type"] == "missing":
        return f"missing required key '{field}'", None
    return f"{field}: {str(err['msg']).removeprefix('Value error, ')}", None


def _model_at(loc: list[str]) -> type[BaseModel]:
    model: type[BaseModel] = Spec
    for part in loc:
        annotation = model.model_fields[part].annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
    return model
