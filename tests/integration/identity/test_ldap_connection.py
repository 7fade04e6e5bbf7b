"""The directory's connection: Nagle's algorithm off before TLS wraps it."""

from __future__ import annotations

import socket
from types import SimpleNamespace

from fleetcron.services.identity.ldap import _StdlibTls
from fleetcron.tls import verifying_context


def test_the_directorys_connection_sends_without_waiting_to_fill_a_packet() -> None:
    """Nagle's algorithm is off on the directory's connection: with it on, a log-in waited
    about 90 ms of its 100 for acknowledgements (docs/benchmarks.md)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
        connection = SimpleNamespace(socket=client)
        try:
            # The check can fail: a new connection has the algorithm on.
            assert client.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0
            _StdlibTls(verifying_context(), "127.0.0.1").wrap_socket(connection)
            assert connection.socket.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        finally:
            connection.socket.close()
            client.close()
            accepted.close()
