"""Nagle's algorithm off on the JVM's end of py4j's sockets, so that a large answer is not held 40 ms.

py4j's JVM side writes each answer through an 8 KB buffer and does not set ``TCP_NODELAY``. An answer
longer than the buffer leaves in two writes, and the kernel holds the second until the first is
acknowledged, which the Python side delays by up to 40 ms (delayed ACK): on this machine a string of
8,200 characters took 44 ms to cross where one of 8,000 took 1 ms. An auto CDC batch's observed deletes
(2,000 keys and sequences, 66 KB) are such an answer, as are a progress, a wide schema or a plan.

pyspark pins each Python thread to a connection of its own, so the option is set per thread, once:
:func:`no_delay` is called when the session starts, for the thread that drives the run, and at the start
of every function the JVM calls back (a foreachBatch function, the listener), whose connection the JVM
opened on its own thread (a stream's, the listener bus's): inside a foreachBatch function, the string of
8,200 characters took 48 ms on the connection as py4j opened it, 0.7 ms with the option.

Examples:
    >>> from deltaflow.runtime.jvm_sockets import no_delay
    >>> no_delay()  # doctest: +SKIP

"""

from __future__ import annotations

import threading
from typing import Any

_DONE = threading.local()  # the gateway whose connection this thread has set


def no_delay() -> None:
    """Set ``TCP_NODELAY`` on the JVM's end of this thread's py4j connection (once per thread and JVM).

    Cheap after the first call on a thread (a thread-local look-up), so every callback makes it. Without
    a running SparkContext, or with a py4j that does not expose the connection, it does nothing: the
    option only saves time.
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
        # Two PythonClients: the first holds the connections Python opened, the one pyspark puts in its
        # place for callbacks those the JVM opened; each knows its own per thread.
        for listener in gateway.java_gateway_server.getListeners():
            if listener.getClass().getName() == "py4j.PythonClient":
                connection = listener.getPerThreadConnection()
                if connection is not None:
                    return connection.getSocket()
    except Py4JError:
        return None
    return None
