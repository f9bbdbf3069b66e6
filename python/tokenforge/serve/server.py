"""How the playground runs on uvicorn: deadlines and a bound on connections.

uvicorn's own settings close an idle keep-alive connection and answer 503 past
a number of requests in flight, but a client that sends half a request head
and stops holds its connection (and a file descriptor) for as long as it
likes, and any number of them may connect. :func:`server_options` give
uvicorn a protocol that closes a connection whose request head has not
arrived ``header_timeout`` seconds after it opened (or after its previous
response), and that closes at once any connection past ``max_connections``
open ones; the app (:mod:`tokenforge.serve.app`) gives a request body
``body_timeout`` seconds (then 408) and logs a client that disconnects while
sending it in one line.

Not handled: slow readers of a response (a client that stops reading is held
by the transport's flow control until it goes away), TLS, HTTP/2.
"""

from __future__ import annotations

import asyncio
import logging

__all__ = ["HEADER_TIMEOUT", "BODY_TIMEOUT", "MAX_CONNECTIONS", "server_options", "LOG"]

#: seconds a connection may take to send a request head
HEADER_TIMEOUT = 10.0
#: seconds a request may take to send its body (then 408)
BODY_TIMEOUT = 30.0
#: open connections at most; more are closed as they arrive
MAX_CONNECTIONS = 256

#: the playground's log (one line per dropped or disconnected client)
LOG = logging.getLogger("tokenforge.serve")


def _guarded_protocol(header_timeout: float, max_connections: int) -> type:
    """uvicorn's h11 protocol with a request-head deadline and a connection bound."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11Protocol(H11Protocol):
        _head_timer = None

        # (uvicorn's own override narrows asyncio's stub, BaseTransport, the same way)
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                LOG.warning(
                    "closing a new connection: %d are open, the limit is %d", len(self.connections) - 1, max_connections
                )
                transport.close()
                return
            self._arm()

        def _arm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            self._head_timer = self.loop.call_later(header_timeout, self._head_too_slow)

        def _head_too_slow(self) -> None:
            self._head_timer = None
            if self.cycle is None or self.cycle.response_complete:  # no request head in progress arrived whole
                LOG.warning("closing a connection whose request head did not arrive within %g s", header_timeout)
                self.transport.close()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()  # the next request's head has the same deadline

        def connection_lost(self, exc: Exception | None) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None
            super().connection_lost(exc)

    return GuardedH11Protocol


def server_options(
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    header_timeout: float = HEADER_TIMEOUT,
    max_connections: int = MAX_CONNECTIONS,
    log_level: str = "warning",
) -> dict:
    """The keyword arguments of ``uvicorn.run(app, ...)`` / ``uvicorn.Config(app, ...)``
    that ``tokenforge serve`` runs the playground with."""
    return {
        "host": host,
        "port": port,
        "log_level": log_level,
        "lifespan": "off",
        "http": _guarded_protocol(header_timeout, max_connections),
        "limit_concurrency": max_connections + 1,  # (uvicorn answers 503 at this many: ours closes past the bound)
        "timeout_keep_alive": 5,
    }
