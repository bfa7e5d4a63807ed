"""S3 and S3-compatible servers: the spec's ``s3:`` keys for each client, and deltaflow's files on S3.

One set of keys (:class:`~deltaflow.spec.S3Spec`) reaches the three clients that touch ``storage``:

* Spark, through Hadoop's S3A connector (:func:`hadoop_conf`, ``spark.hadoop.fs.s3a.*``);
* ``deltalake``, the JVM-free reader of the tables (:func:`delta_options`);
* botocore, for the files deltaflow keeps beside the tables (:class:`S3FileSystem`).

Examples:
    >>> from deltaflow.spec import S3Spec
    >>> s3 = S3Spec(endpoint="http://127.0.0.1:19000", access_key="k", secret_key="s", path_style=True)
    >>> hadoop_conf(s3)["spark.hadoop.fs.s3a.connection.ssl.enabled"]
    'false'
    >>> split_uri("s3a://lake/clicks/tables")
    ('lake', 'clicks/tables')

"""

from __future__ import annotations

import copy
import functools
import math
from typing import TYPE_CHECKING, Any

from deltaflow.errors import StorageError
from deltaflow.storage.retry import RetryPolicy

if TYPE_CHECKING:
    from deltaflow.spec import S3Spec

SCHEMES = ("s3a://", "s3://")
_SIMPLE_CREDENTIALS = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"


def is_s3(uri: str) -> bool:
    """Whether ``uri`` is on S3 (``s3a://`` or ``s3://``)."""
    return uri.startswith(SCHEMES)


def split_uri(uri: str) -> tuple[str, str]:
    """``(bucket, key)`` of an ``s3a://`` / ``s3://`` URI (the key without a trailing ``/``)."""
    rest = uri.split("://", 1)[1]
    bucket, _, key = rest.partition("/")
    return bucket, key.rstrip("/")


def hadoop_conf(s3: S3Spec | None) -> dict[str, str]:
    """The Spark settings that point S3A at ``s3`` (for AWS with its default credential chain: its retries).

    Examples:
        >>> hadoop_conf(None)["spark.hadoop.fs.s3a.input.stream.type"]
        'classic'

    """
    prefix = "spark.hadoop.fs.s3a."
    # Hadoop 3.5's default input stream (the analytics accelerator) retries a read only in the SDK (three
    # attempts: a flow failed on one in `make soak-s3`) and keeps an entry per object read for as long as
    # the file system lives (HADOOP-20058), which is the whole of a continuous run. The classic stream
    # retries with S3A's policy, within the budget.
    conf = {f"{prefix}input.stream.type": "classic", **s3a_retries((s3 or _default_spec()).retry_seconds)}
    if s3 is None:
        return conf
    conf |= {f"{prefix}endpoint.region": s3.region, f"{prefix}path.style.access": str(s3.path_style).lower()}
    if s3.endpoint:
        conf[f"{prefix}endpoint"] = s3.endpoint
        conf[f"{prefix}connection.ssl.enabled"] = str(s3.endpoint.startswith("https://")).lower()
        # A local file (a state store snapshot's) goes up through S3A's output stream, not the SDK's async
        # transfer manager: that client fails on some S3-compatible servers' `100 Continue` ("Status Code:
        # 100", aws/aws-sdk-java-v2#1969; moto here, every snapshot of a RocksDB state store).
        conf[f"{prefix}optimized.copy.from.local.enabled"] = "false"
    if s3.access_key and s3.secret_key:
        conf |= {f"{prefix}access.key": s3.access_key, f"{prefix}secret.key": s3.secret_key,
                 f"{prefix}aws.credentials.provider": _SIMPLE_CREDENTIALS}
    return conf


#: S3A's first waits: before a retry of a failed call (growing by as much each time), and of a throttled one
#: (doubling, with ±50 % jitter).
_S3A_INTERVAL, _S3A_THROTTLE_INTERVAL = 0.5, 0.5


def s3a_retries(budget: float) -> dict[str, str]:
    """S3A's retry settings that spend about ``budget`` seconds before a call fails.

    S3A sleeps ``interval × n`` before its retry *n* of a failed call (a sum of ``interval × n(n+1)/2``)
    and about ``interval × 2ⁿ`` before retry *n* of a throttled one (a sum of about ``interval × 2ⁿ⁺¹``);
    the SDK below it tries each request twice.

    Examples:
        >>> retries = s3a_retries(120)
        >>> retries["spark.hadoop.fs.s3a.retry.limit"], retries["spark.hadoop.fs.s3a.retry.throttle.limit"]
        ('21', '6')

    """
    prefix = "spark.hadoop.fs.s3a."
    failed = max(1, int(((1 + 8 * budget / _S3A_INTERVAL) ** 0.5 - 1) / 2))
    throttled = max(1, int(math.log2(max(2.0, budget / _S3A_THROTTLE_INTERVAL))) - 1)
    return {f"{prefix}attempts.maximum": "2", f"{prefix}retry.limit": str(failed),
            f"{prefix}retry.interval": f"{int(_S3A_INTERVAL * 1000)}ms",
            f"{prefix}retry.throttle.limit": str(throttled),
            f"{prefix}retry.throttle.interval": f"{int(_S3A_THROTTLE_INTERVAL * 1000)}ms",
            f"{prefix}connection.establish.timeout": "5s"}


def delta_options(s3: S3Spec | None) -> dict[str, str]:
    """``storage_options`` for ``deltalake`` (the object_store crate's AWS keys)."""
    if s3 is None:
        return {}
    options = {"AWS_REGION": s3.region, "AWS_EC2_METADATA_DISABLED": "true",
               "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": str(not s3.path_style).lower()}
    if s3.endpoint:
        options["AWS_ENDPOINT_URL"] = s3.endpoint
        options["AWS_ALLOW_HTTP"] = str(s3.endpoint.startswith("http://")).lower()
    if s3.access_key and s3.secret_key:
        options |= {"AWS_ACCESS_KEY_ID": s3.access_key, "AWS_SECRET_ACCESS_KEY": s3.secret_key}
    # Commits put the log entry only if absent (If-None-Match), so two writers never overwrite a version.
    options["AWS_CONDITIONAL_PUT"] = "etag"
    # object_store's retries: as many as fit in the budget (its backoff is jittered and capped at 15 s)
    options |= {"max_retries": "1000", "retry_timeout": f"{max(1, round(s3.retry_seconds))}s"}
    return options


#: How long deltaflow's own S3 calls (records, leases) wait for an answer before they try again.
READ_TIMEOUT_SECONDS = 20.0
#: How long the check before a run waits for the storage to answer at all.
CHECK_SECONDS = 5.0


def _client(s3: S3Spec | None) -> Any:
    # botocore's own client (what boto3.client returns): boto3 would import s3transfer too, which the JVM-free
    # reads (status, history) pay on every start and never use
    from botocore.config import Config
    from botocore.session import get_session

    s3 = s3 or _default_spec()
    config = Config(connect_timeout=3, read_timeout=READ_TIMEOUT_SECONDS,
                    retries={"total_max_attempts": 1},  # every call goes through S3FileSystem's RetryPolicy
                    s3={"addressing_style": "path" if s3.path_style else "auto"})
    return get_session().create_client("s3", endpoint_url=s3.endpoint, region_name=s3.region, config=config,
                                       aws_access_key_id=s3.access_key, aws_secret_access_key=s3.secret_key)


def _default_spec() -> S3Spec:
    from deltaflow.spec import S3Spec

    return S3Spec()


class S3FileSystem:
    """:class:`~deltaflow.storage.fs.FileSystem` on S3 (botocore): records, checkpoint folders, leases.

    S3 has no folders: a folder is the prefix its files share (an empty one, a ``dir/`` marker). A PUT is
    atomic (readers see the old object or the new), and a conditional PUT (``If-None-Match`` /
    ``If-Match``) is the compare-and-swap the table leases need. Every call goes through one
    :class:`~deltaflow.storage.retry.RetryPolicy` (the spec's ``s3.retry_budget``).

    Args:
        s3: How to reach the server (default: AWS with its default credential chain).

    """

    def __init__(self, s3: S3Spec | None = None) -> None:
        self.s3 = s3
        self.retry = RetryPolicy((s3 or _default_spec()).retry_seconds)

    def within(self, seconds: float) -> S3FileSystem:
        """The same file system (and client), its calls retried for at most ``seconds``."""
        bounded = copy.copy(self)
        bounded.retry = self.retry.within(seconds)
        return bounded

    @functools.cached_property
    def client(self) -> Any:
        """The botocore client (made on first use: importing botocore takes a moment)."""
        return _client(self.s3)

    def read_text(self, path: str) -> str | None:  # noqa: D102
        found = self.read_versioned(path)
        return found[0] if found else None

    def read_versioned(self, path: str) -> tuple[str, str] | None:  # noqa: D102
        found = self._get(path)
        return (found[0].decode(errors="replace"), found[1]) if found else None

    def read_bytes(self, path: str) -> bytes | None:  # noqa: D102
        found = self._get(path)
        return found[0] if found else None

    def _get(self, path: str) -> tuple[bytes, str] | None:
        bucket, key = split_uri(path)

        def get() -> tuple[bytes, str] | None:
            try:
                answer = self.client.get_object(Bucket=bucket, Key=key)
            except self.client.exceptions.NoSuchKey:
                return None
            return answer["Body"].read(), str(answer["ETag"])  # the body too: an answer can be cut short

        return self.retry.run("GetObject", path, get)

    def write_text(self, path: str, text: str) -> None:  # noqa: D102
        bucket, key = split_uri(path)
        self.retry.run("PutObject", path, lambda: self.client.put_object(Bucket=bucket, Key=key,
                                                                          Body=text.encode()))

    def write_if(self, path: str, text: str, token: str | None) -> str | None:  # noqa: D102
        from botocore.exceptions import ClientError

        bucket, key = split_uri(path)
        condition = {"IfNoneMatch": "*"} if token is None else {"IfMatch": token}
        try:
            answer = self.retry.run("PutObject", path, lambda: self.client.put_object(
                Bucket=bucket, Key=key, Body=text.encode(), **condition))
        except ClientError as exc:
            if exc.response["Error"]["Code"] in ("PreconditionFailed", "ConditionalRequestConflict",
                                                 "NoSuchKey"):
                # A retry whose first attempt was written, but whose answer was lost, meets its own write.
                found = self.read_versioned(path)
                return found[1] if found is not None and found[0] == text else None
            raise
        return str(answer["ETag"])

    def _entries(self, path: str) -> tuple[list[str], list[str]]:
        """The (sub-folder, file) names directly in folder ``path``."""
        bucket, key = split_uri(path)
        prefix = f"{key}/" if key else ""

        def entries() -> tuple[list[str], list[str]]:
            folders: list[str] = []
            files: list[str] = []
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix,
                                                                             Delimiter="/"):
                folders += [p["Prefix"][len(prefix):].rstrip("/") for p in page.get("CommonPrefixes", [])]
                files += [o["Key"][len(prefix):] for o in page.get("Contents", [])]
            return folders, files

        return self.retry.run("ListObjectsV2", path, entries)

    def list(self, path: str) -> list[str]:  # noqa: D102
        folders, files = self._entries(path)
        return sorted(set(folders) | {f for f in files if f})

    def is_dir(self, path: str) -> bool:  # noqa: D102
        bucket, key = split_uri(path)
        answer = self.retry.run("ListObjectsV2", path, lambda: self.client.list_objects_v2(
            Bucket=bucket, Prefix=f"{key}/", MaxKeys=1))
        return bool(answer.get("KeyCount"))

    def exists(self, path: str) -> bool:  # noqa: D102
        from botocore.exceptions import ClientError

        bucket, key = split_uri(path)
        try:
            self.retry.run("HeadObject", path, lambda: self.client.head_object(Bucket=bucket, Key=key))
            return True
        except ClientError:  # 404: no such object (a folder, perhaps)
            return self.is_dir(path)

    def copy(self, source: str, target: str) -> None:  # noqa: D102
        (source_bucket, source_key), (bucket, key) = split_uri(source), split_uri(target)
        self.retry.run("CopyObject", target, lambda: self.client.copy_object(
            Bucket=bucket, Key=key, CopySource={"Bucket": source_bucket, "Key": source_key}))

    def make_dirs(self, path: str) -> None:  # noqa: D102
        # S3 has no folders, only prefixes: an empty one is a "dir/" marker object, as S3A makes them (a new
        # checkpoint generation must be seen before Spark writes into it).
        bucket, key = split_uri(path)
        self.retry.run("PutObject", path, lambda: self.client.put_object(Bucket=bucket, Key=f"{key}/",
                                                                          Body=b""))

    def delete(self, path: str) -> None:  # noqa: D102
        bucket, key = split_uri(path)
        self.retry.run("DeleteObject", path, lambda: self.client.delete_object(Bucket=bucket, Key=key))

    def delete_tree(self, path: str) -> None:  # noqa: D102
        bucket, key = split_uri(path)

        def delete() -> None:  # deleting what is already gone is no error: the whole listing again
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket,
                                                                             Prefix=f"{key}/"):
                keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
                if keys:
                    self.client.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})

        self.retry.run("DeleteObjects", path, delete)

    def check(self, root: str) -> None:
        """Make sure ``root``'s bucket answers with these credentials, in one line if not.

        Raises:
            StorageError: The endpoint does not answer, the credentials are refused, or there is no bucket.

        """
        from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError

        bucket, _ = split_uri(root)
        where = (self.s3.endpoint if self.s3 and self.s3.endpoint else None) or "AWS S3"
        try:  # a wrong endpoint is told in seconds, not after the whole retry budget
            self.retry.within(CHECK_SECONDS).run("HeadBucket", root,
                                                 lambda: self.client.head_bucket(Bucket=bucket))
        except StorageError as exc:
            if not isinstance(exc.__cause__, EndpointConnectionError):
                raise
            raise StorageError(f"storage '{root}': no S3 server answers at {where}",
                               location="s3.endpoint", hint="is the server running? ('deltaflow s3 start')"
                               ) from None
        except ClientError as exc:
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
            if status == 404:
                raise StorageError(f"storage '{root}': bucket '{bucket}' does not exist at {where}",
                                   location="storage", hint="create it first") from None
            if status in (401, 403):
                raise StorageError(f"storage '{root}': {where} refused the credentials (HTTP {status})",
                                   location="s3.access_key / s3.secret_key") from None
            raise StorageError(f"storage '{root}': {where} answered {exc.response['Error'].get('Code')}",
                               location="s3") from None
        except BotoCoreError as exc:
            raise StorageError(f"storage '{root}': {where}: {exc}", location="s3") from None

