"""py4j's JVM end without Nagle's algorithm on the connection of each thread that asks."""

from __future__ import annotations

import threading

from deltaflow.runtime.py4j_sockets import no_delay, this_threads_socket


def test_a_threads_connection_gets_no_delay_once_it_asks(spark) -> None:  # type: ignore[no-untyped-def]
    assert this_threads_socket().getTcpNoDelay()  # the session's thread: build_session set it
    seen: list[bool] = []

    def fresh_thread() -> None:  # a connection of its own, as py4j opens it
        seen.append(this_threads_socket().getTcpNoDelay())
        no_delay()
        seen.append(this_threads_socket().getTcpNoDelay())

    thread = threading.Thread(target=fresh_thread)
    thread.start()
    thread.join()
    assert seen == [False, True]
