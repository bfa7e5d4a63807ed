"""``deltaflow ui``: a read-only web page of a pipeline, live, and ``/metrics`` for Prometheus; no JVM.

A small Starlette app over :class:`~deltaflow.observe.dashboard.Dashboard`, served by uvicorn:

* ``GET /``: the page (``static/index.html``, its script and the vendored uPlot; nothing from the internet);
* ``GET /api/state``: the dashboard's state as JSON;
* ``GET /api/events``: the same state as server-sent events, whenever it changes and at least every
  :data:`HEARTBEAT_SECONDS`;
* ``GET /metrics``: Prometheus' text format (:mod:`deltaflow.ui.metrics`).

Nothing in a request names a file or a table: the pipeline is the one the server was started for, and
static files are served from the package's folder only. It binds ``127.0.0.1`` unless told otherwise.

Examples:
    >>> server = UiServer(spec, layout, port=0).start()  # doctest: +SKIP
    >>> server.url  # doctest: +SKIP
    'http://127.0.0.1:41623/'

"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
from collections.abc import AsyncIterator, Callable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deltaflow.observe.dashboard import Dashboard

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

    from deltaflow.spec import Spec
    from deltaflow.storage import StorageLayout

#: Seconds between two looks at the event log for the event stream.
POLL_SECONDS = 1.0
#: The stream sends the state at least this often (ages and backlogs move without new batches).
HEARTBEAT_SECONDS = 5.0
DEFAULT_PORT = 8787
STATIC = Path(str(resources.files("deltaflow.ui") / "static"))


def _json(state: dict[str, Any]) -> str:
    return json.dumps(state, default=str, separators=(",", ":"))


def create_app(board: Dashboard, stopping: Callable[[], bool] = lambda: False) -> Starlette:
    """The Starlette app serving ``board``'s pipeline; its event streams end once ``stopping()``."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import FileResponse, Response, StreamingResponse
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    from deltaflow.ui.metrics import render

    async def page(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-store"})

    async def state(request: Request) -> Response:
        return Response(_json(await run_in_threadpool(board.state)), media_type="application/json")

    async def metrics(request: Request) -> Response:
        snapshot, events = await run_in_threadpool(board.snapshot)
        return Response(render(snapshot, events), media_type="text/plain; version=0.0.4; charset=utf-8")

    async def events(request: Request) -> Response:
        async def stream() -> AsyncIterator[str]:
            sent, quiet = None, 0.0
            # a stream ends with the server: uvicorn's stop waits for every open response to finish
            while not stopping() and not await request.is_disconnected():
                snapshot = await run_in_threadpool(board.state)
                changed = {k: v for k, v in snapshot.items() if k != "generated_at"} != sent
                if changed or quiet >= HEARTBEAT_SECONDS:
                    yield f"data: {_json(snapshot)}\n\n"
                    sent, quiet = {k: v for k, v in snapshot.items() if k != "generated_at"}, 0.0
                await asyncio.sleep(POLL_SECONDS)
                quiet += POLL_SECONDS

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    return Starlette(routes=[
        Route("/", page), Route("/api/state", state), Route("/api/events", events),
        Route("/metrics", metrics), Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ])


class UiServer:
    """The page of one pipeline, served by uvicorn on a thread of this process.

    Args:
        spec: The pipeline's spec.
        layout: Its storage.
        host: The address to bind (default loopback; anything else is reachable from the network).
        port: The port (0: any free one; see :attr:`url`).

    """

    def __init__(self, spec: Spec, layout: StorageLayout, host: str = "127.0.0.1",
                 port: int = DEFAULT_PORT) -> None:
        import uvicorn

        self.board = Dashboard(spec, layout)
        self.host = host
        app = create_app(self.board, lambda: self.server.should_exit)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                                lifespan="off")
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None  # serving, once start() has bound the port

    def start(self, timeout: float = 10.0) -> UiServer:
        """Start serving; returns once the port is bound.

        Raises:
            ConfigError: The port could not be bound (in use, or not allowed).

        """
        from deltaflow.errors import ConfigError

        where = f"{self.host}:{self.server.config.port}"
        try:  # bound here, so that a port in use is deltaflow's one line, not uvicorn's log record first
            family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
            bound = socket.create_server((self.host, self.server.config.port), family=family)
        except OSError as exc:
            reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
            raise ConfigError(f"the dashboard cannot listen on {where}: {reason}",
                              hint="pick another port with --port") from None
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [bound]},
                                        name="deltaflow-ui", daemon=True)
        self._thread.start()
        waited = 0.0
        while not self.server.started:
            if not self._thread.is_alive() or waited > timeout:
                raise ConfigError(f"the dashboard cannot listen on {where}",
                                  hint="is the port in use? pick another with --port")
            self._thread.join(0.05)
            waited += 0.05
        return self

    @property
    def port(self) -> int:
        """The port it listens on."""
        return int(self.server.servers[0].sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        """The page's address."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def wait(self) -> None:
        """Serve until :meth:`stop` (or the process ends)."""
        while self._thread is not None and self._thread.is_alive():
            self._thread.join(0.5)

    def stop(self) -> None:
        """Stop serving, and let go of the Kafka client."""
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.board.close()
