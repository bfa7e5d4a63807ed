"""Storage faults on demand: the local S3 server fails chosen requests with S3's errors, late, or not at all.

The fault tests put rules on the running server (``PUT /_deltaflow/faults``, a JSON list), run a pipeline,
and read how often each rule fired (``GET``); ``DELETE`` clears them. A rule matches a request by method
and by a regular expression over its path (``/bucket/key``) and query, and then:

* answers ``status`` with S3's error document (``503 SlowDown`` by default, ``500 InternalError``...);
* or, with ``reset``, drops the connection without an answer (as a failing load balancer does);
* or, with ``answer_lost``, lets the request through and then drops the connection: the store changed,
  the client does not know (its retry meets its own write);
* after waiting ``delay`` seconds, if given (with no status and no reset: only late).

``first``: only the first N attempts at each distinct request (method and path) fail, so every client that
retries gets through, deterministically; ``times``: at most that many faults in all; ``share``: a random
share of the matching requests (drawn from the rules' seeded generator, :func:`random_faults`). None of
them: every match.

Examples:
    >>> faults = S3Faults("http://127.0.0.1:19000")  # doctest: +SKIP
    >>> faults.set([FaultRule(path=r"/_delta_log/", method="PUT", first=1)])  # doctest: +SKIP
    >>> faults.hits()  # doctest: +SKIP
    [3]

"""

from __future__ import annotations

import json
import random
import re
import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

CONTROL_PATH = "/_deltaflow/faults"
_REASONS = {500: "Internal Server Error", 503: "Service Unavailable", 403: "Forbidden", 404: "Not Found"}
_CODES = {500: "InternalError", 503: "SlowDown", 403: "AccessDenied", 404: "NoSuchKey"}


@dataclass(frozen=True)
class FaultRule:
    """Which requests fail, and how (see the module docstring)."""

    path: str = ""
    method: str | None = None
    status: int | None = 503
    reset: bool = False
    answer_lost: bool = False
    delay: float = 0.0
    first: int | None = None
    times: int | None = None
    share: float | None = None
    seed: int = 0  # of the share's draws (the first rule's seed seeds them all)


#: The random fault levels of the tests and the soak: (SlowDown, InternalError, closed, answer lost, delayed).
DEFAULT_RATES = (0.04, 0.01, 0.01, 0.01, 0.03)
HIGH_RATES = (0.10, 0.05, 0.04, 0.04, 0.02)


def random_faults(rates: tuple[float, float, float, float, float] = DEFAULT_RATES, seed: int = 0,
                  delay: tuple[float, float] = (1.0, 3.0), path: str = "") -> list[FaultRule]:
    """Rules failing a random share of every request (of ``path``): throttled, 5xx, closed, lost, late.

    Each request meets at most one fault: the rules draw one number per request, in order. The delayed
    ones wait the middle of ``delay`` and then go through.

    Examples:
        >>> [(r.status, r.reset, r.answer_lost, r.share) for r in random_faults()][:2]
        [(503, False, False, 0.04), (500, False, False, 0.01)]

    """
    slow, internal, closed, lost, late = rates
    return [FaultRule(path=path, status=503, share=slow, seed=seed),
            FaultRule(path=path, status=500, share=internal),
            FaultRule(path=path, status=None, reset=True, share=closed),
            FaultRule(path=path, status=None, answer_lost=True, share=lost),
            FaultRule(path=path, status=None, delay=sum(delay) / 2, share=late)]


class _Armed:
    def __init__(self, rule: FaultRule) -> None:
        self.rule = rule
        self.pattern = re.compile(rule.path)
        self.hits = 0
        self.attempts: dict[tuple[str, str], int] = {}

    def fires(self, method: str, target: str, draw: float) -> bool:
        """Whether the rule fails this request; ``draw``: where the request's random number fell in it."""
        rule = self.rule
        if (rule.method and rule.method != method) or not self.pattern.search(target):
            return False
        if rule.times is not None and self.hits >= rule.times:
            return False
        if rule.share is not None and not 0 <= draw < rule.share:
            return False
        if rule.first is not None:
            seen = self.attempts.get((method, target), 0)
            self.attempts[(method, target)] = seen + 1
            if seen >= rule.first:
                return False
        self.hits += 1
        return True


class FaultInjector:
    """WSGI middleware that fails the requests its rules match; rules come over HTTP (:class:`S3Faults`)."""

    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app
        self.lock = threading.Lock()
        self.armed: list[_Armed] = []
        self.random = random.Random(0)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:  # noqa: D102
        path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "")
        if path == CONTROL_PATH:
            return self._control(environ, start_response)
        target = path + (f"?{environ['QUERY_STRING']}" if environ.get("QUERY_STRING") else "")
        with self.lock:
            rule = None
            draw = self.random.random()  # the shares of the rules, one after another, on one number
            for armed in self.armed:
                if armed.fires(method, target, draw):
                    rule = armed.rule
                    break
                draw -= armed.rule.share or 0.0
        if rule is None:
            return self.app(environ, start_response)
        if rule.delay:
            time.sleep(rule.delay)
        if rule.answer_lost:
            list(self.app(environ, lambda *args: None))  # done, and its answer thrown away
            return _reset(environ)
        if rule.reset:
            return _reset(environ)
        if rule.status is None:
            return self.app(environ, start_response)
        code = _CODES.get(rule.status, "InternalError")
        body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>injected by '
                f"deltaflow's fault tests</Message><Resource>{path}</Resource></Error>").encode()
        start_response(f"{rule.status} {_REASONS.get(rule.status, 'Error')}",
                       [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))])
        return [body]

    def _control(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        method = environ.get("REQUEST_METHOD")
        with self.lock:
            if method == "PUT":
                size = int(environ.get("CONTENT_LENGTH") or 0)
                rules = json.loads(environ["wsgi.input"].read(size) or b"[]")
                self.armed = [_Armed(FaultRule(**r)) for r in rules]
                self.random = random.Random(self.armed[0].rule.seed if self.armed else 0)
            elif method == "DELETE":
                self.armed = []
            body = json.dumps([{**asdict(a.rule), "hits": a.hits} for a in self.armed]).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]


def _reset(environ: dict[str, Any]) -> list[bytes]:
    """End the request's connection at once, answering nothing (the server's handler then gives up on it)."""
    sock = environ.get("werkzeug.socket")
    if isinstance(sock, socket.socket):
        sock.shutdown(socket.SHUT_RDWR)  # close() would wait for the handler's own references to the socket
    raise ConnectionAbortedError("fault injected: connection dropped")


class S3Faults:
    """Puts fault rules on the local S3 server at ``endpoint`` and reads how often each fired."""

    def __init__(self, endpoint: str) -> None:
        self.url = endpoint.rstrip("/") + CONTROL_PATH

    def set(self, rules: Iterable[FaultRule]) -> None:
        """Replace the server's rules with ``rules`` (their counts start at 0)."""
        self._call("PUT", json.dumps([asdict(r) for r in rules]).encode())

    def hits(self) -> list[int]:
        """How many requests each rule has failed (or delayed), in the order given."""
        return [int(r["hits"]) for r in self._call("GET")]

    def clear(self) -> None:
        """No more faults."""
        self._call("DELETE")

    def _call(self, method: str, body: bytes | None = None) -> list[dict[str, Any]]:
        request = urllib.request.Request(self.url, data=body, method=method)
        with urllib.request.urlopen(request, timeout=10) as answer:
            found: list[dict[str, Any]] = json.loads(answer.read())
            return found
