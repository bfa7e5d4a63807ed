"""Nagle's algorithm off on the JVM's end of py4j's sockets, so that a large answer is not held 40 ms.

py4j's JVM side writes each answer through an 8 KB buffer and does not set ``TCP_NODELAY``. An answer
longer than the buffer leaves in two writes, and the kernel holds the second until the first is
acknowledged, which the Python side delays by up to 40 ms (delayed ACK): on this machine a string of
8,200 characters took 44 ms to cross where one of 8,000 took 1 ms. An auto CDC batch's observed deletes
(2,000 keys and sequences, 66 KB) are such an answer, as are a progress, a wide schema or a plan.

pyspark pins each Python thread to a connection of its own, so the option is set per thread, once:
:func:`no_delay` is called when the session starts, for the thread that drives the run. The connections
the JVM opens to call Python (a foreachBatch function, a listener) are not its PythonClient's per-thread
ones (py4j 0.10.9.9 does not say which one a callback runs on), so their answers of more than 8 KB still
wait; that is why an auto CDC batch reads its observed metrics once (:meth:`Tombstones.watch`).

Example:
    >>> from deltaflow.runtime.jvm_sockets import no_delay
    >>> no_delay()  # doctest: +SKIP

"""

from __future__ import annotations

import threading
from typing import Any

_DONE = threading.local()  # the gateway whose connection this thread has set


def no_delay() -> None:
    """Set ``TCP_NODELAY`` on the JVM's end of this thread's py4j connection (once per thread and JVM).

    Without a running SparkContext, or with a py4j that does not expose the connection, it does nothing:
    the option only saves time.
    """
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None or getattr(_DONE, "gateway", None) is gateway:
        return
    socket = this_threads_socket()
    if socket is not None:
        socket.setTcpNoDelay(True)
    _DONE.gateway = gateway


def this_threads_socket() -> Any:
    """The JVM's ``java.net.Socket`` of this thread's py4j connection, or ``None`` when py4j has none."""
    from py4j.protocol import Py4JError
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None:
        return None
    try:
        for listener in gateway.java_gateway_server.getListeners():
            if listener.getClass().getName() == "py4j.PythonClient":  # pinned threads' connections
                connection = listener.getPerThreadConnection()
                return None if connection is None else connection.getSocket()
    except Py4JError:
        return None
    return None
