"""py4j's JVM end without Nagle's algorithm on the session's thread's connection."""

from __future__ import annotations

from deltaflow.runtime import jvm_sockets
from deltaflow.runtime.jvm_sockets import no_delay, this_threads_socket


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
