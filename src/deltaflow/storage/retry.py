"""One retry policy for deltaflow's storage calls: a time budget, jittered backoff, one line at the end.

S3 answers a share of requests with ``503 SlowDown`` or ``500 InternalError``, drops connections and
answers late; a client is expected to try again, spread out, for as long as the caller can wait. A count
of attempts says nothing about time (three quick attempts fail inside a second-long throttling burst), so
the policy is a **time budget** (``s3.retry_budget`` in the spec, two minutes unless set), with
"full jitter" exponential backoff: before try *n* it waits a random time up to ``min(cap, base × 2ⁿ)``,
and the last try comes when the budget ends.

What is tried again (:func:`retryable`): throttling and 5xx answers, timeouts, connections refused, reset
or closed mid-answer. What is not: the answers that do not change by asking again (access denied, no such
bucket, a failed precondition, which the callers read as an answer). A fault that outlasts the budget is a
:class:`~deltaflow.errors.StorageError` of one line naming the operation, the path, the tries and the time.

The same budget reaches the other clients deltaflow configures: Hadoop's S3A (``storage/s3.py``
``hadoop_conf``) and ``deltalake`` (``delta_options``), each through its own retry settings.

Examples:
    >>> policy = RetryPolicy(budget_seconds=5)
    >>> calls = []
    >>> def flaky() -> str:
    ...     calls.append(1)
    ...     if len(calls) < 3:
    ...         raise ConnectionResetError("reset by peer")
    ...     return "ok"
    >>> policy.run("GetObject", "s3a://lake/a", flaky), len(calls)
    ('ok', 3)

"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from deltaflow.errors import StorageError, first_line

T = TypeVar("T")

_RETRIED_CODES = frozenset({"SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout", "Throttling",
                            "ThrottlingException", "RequestTimeTooSkewed", "RequestLimitExceeded",
                            "BadDigest", "IncompleteBody", "OperationAborted"})


def retryable(exc: BaseException) -> bool:
    """Whether asking again may get another answer: throttling, 5xx, timeouts, lost connections.

    Examples:
        >>> retryable(TimeoutError()), retryable(PermissionError())
        (True, False)

    """
    response = getattr(exc, "response", None)
    if isinstance(response, dict):  # botocore's ClientError: the server answered
        code = str(response.get("Error", {}).get("Code", ""))
        status = int(response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        return code in _RETRIED_CODES or status >= 500 or status == 429
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    from botocore.exceptions import ConnectionError as BotoConnectionError
    from botocore.exceptions import HTTPClientError, IncompleteReadError, ResponseStreamingError
    from urllib3.exceptions import HTTPError as Urllib3Error

    return isinstance(exc, (BotoConnectionError, HTTPClientError, IncompleteReadError, ResponseStreamingError,
                            Urllib3Error))


@dataclass(frozen=True)
class RetryPolicy:
    """Try a storage call again, with jittered exponential backoff, until ``budget_seconds`` have passed.

    Args:
        budget_seconds: How long a call may keep failing before it is given up.
        base_seconds: The first backoff's upper bound (doubling with each try).
        cap_seconds: The longest backoff.
        sleep: Waits (tests replace it).

    """

    budget_seconds: float = 120.0
    base_seconds: float = 0.1
    cap_seconds: float = 5.0
    sleep: Callable[[float], None] = time.sleep

    def run(self, operation: str, path: str, call: Callable[[], T]) -> T:
        """``call()``, tried again while it fails with a :func:`retryable` error and the budget lasts.

        Raises:
            StorageError: It still failed when the budget ran out (one line: operation, path, tries, time).

        """
        began = time.monotonic()
        tries = 0
        while True:
            tries += 1
            try:
                return call()
            except Exception as exc:
                if not retryable(exc):
                    raise
                spent = time.monotonic() - began
                if spent >= self.budget_seconds:
                    raise StorageError(
                        f"{operation} {path} failed {tries} time(s) in {spent:.0f} s: {first_line(exc)}",
                        location="s3.retry_budget",
                        hint=f"the storage kept failing for longer than the retry budget "
                             f"({self.budget_seconds:.0f} s); run again once it answers") from exc
                wait = random.uniform(0, min(self.cap_seconds, self.base_seconds * 2 ** tries))
                self.sleep(min(wait, self.budget_seconds - spent))  # the last try at the budget's end

    def within(self, seconds: float) -> RetryPolicy:
        """The same policy with at most ``seconds`` of budget (a check that must answer soon)."""
        return RetryPolicy(min(self.budget_seconds, seconds), self.base_seconds, self.cap_seconds, self.sleep)
