"""py4j's JVM end without Nagle's algorithm: the session's thread, and every callback of a run."""

from __future__ import annotations

import threading
from typing import Any

from deltaflow.pipeline import Pipeline
from deltaflow.runtime import jvm_sockets
from deltaflow.runtime.jvm_names import java_class
from deltaflow.runtime.jvm_sockets import no_delay, this_threads_socket
from deltaflow.spec import load_spec
from helpers import AUTO_CDC

CALLBACKS = AUTO_CDC + """
@dp.materialized_view
def by_op():
    return spark.read.table("changes").groupBy("op").agg(F.count("*").alias("n"))

@dp.foreach_batch_sink(name="elsewhere")
def elsewhere(df, batch_id):
    df.count()

@dp.append_flow(target="elsewhere")
def to_elsewhere():
    return spark.readStream.table("changes")
"""


def callback_connections(spark: Any) -> dict[int, Any]:
    """Every connection py4j's JVM opened to call Python and keeps for reuse, by local port."""
    pool = java_class(spark, "java.lang.Class").forName("py4j.CallbackClient").getDeclaredField("connections")
    pool.setAccessible(True)
    found = {}
    for listener in spark.sparkContext._gateway.java_gateway_server.getListeners():
        if listener.getClass().getName() == "py4j.PythonClient":
            for connection in pool.get(listener).toArray():
                if (socket := connection.getSocket()) is not None:
                    found[socket.getLocalPort()] = socket
    return found


def test_the_sessions_thread_talks_to_the_jvm_without_nagle(spark) -> None:  # type: ignore[no-untyped-def]
    socket = this_threads_socket()
    assert socket.getTcpNoDelay()  # build_session set it
    socket.setTcpNoDelay(False)  # as py4j opens a connection
    try:
        no_delay()  # once per thread: this one has asked already
        assert not socket.getTcpNoDelay()
        jvm_sockets._DONE.gateway = None
        no_delay()
        assert socket.getTcpNoDelay()
    finally:
        socket.setTcpNoDelay(True)


def test_every_callback_of_a_run_answers_without_nagle(spark, make_project) -> None:  # type: ignore[no-untyped-def]
    project = make_project(CALLBACKS)
    project.drop("1.json", [{"id": i, "seq": 1, "op": "UPSERT"} for i in range(5)])
    before = callback_connections(spark)
    pipeline = Pipeline(load_spec(project.spec_path), spark=spark).start("available_now")
    pipeline.finish(threading.Event())

    opened = {port: s for port, s in callback_connections(spark).items() if port not in before}
    # one stream per flow (bronze's append, auto CDC, the view, the sink); the listener bus's thread, and
    # so its connection, may be older than this run
    assert len(opened) >= 4, sorted(opened)
    assert all(s.getTcpNoDelay() for s in opened.values()), {p: s.getTcpNoDelay() for p, s in opened.items()}
