"""The playground under slow and vanishing clients (issue 32 item 9): a request
head and a body each have a deadline, connections are bounded, and a client
that disconnects mid-body is one log line, not a traceback."""

from __future__ import annotations

import logging
import socket
import threading
import time

import pytest

pytest.importorskip("uvicorn")
pytest.importorskip("starlette")

import tokenforge  # noqa: E402
from tokenforge.serve import create_app  # noqa: E402
from tokenforge.serve.server import server_options  # noqa: E402


class _Server:
    def __init__(self, app, **config):
        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, **server_options("127.0.0.1", self.port, **config)))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30  # a bound on start-up, not a timing assertion
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "the test server did not start"
            time.sleep(0.01)

    def connect(self) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", self.port), timeout=20)
        return s

    def close(self):
        self.server.should_exit = True
        self.thread.join(30)


@pytest.fixture(scope="module")
def app():
    tok = tokenforge.BPETokenizer.train_from_iterator(["hello world"] * 20, 270, progress=False)
    return create_app({"bpe": tok}, body_timeout=0.5)


def _read_all(s: socket.socket) -> bytes:
    out = b""
    while True:
        try:
            chunk = s.recv(65536)
        except (ConnectionResetError, TimeoutError):
            return out
        if not chunk:
            return out
        out += chunk


def _read_response(s: socket.socket) -> bytes:
    """One whole response (its head, then Content-Length bytes of body)."""
    out = b""
    while b"\r\n\r\n" not in out:
        out += s.recv(65536)
    head, _, body = out.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    while len(body) < length:
        body += s.recv(65536)
    return head + b"\r\n\r\n" + body


def test_a_half_sent_head_is_closed_at_its_deadline(app):
    srv = _Server(app, header_timeout=0.5)
    try:
        s = srv.connect()
        s.sendall(b"POST /api/encode HTTP/1.1\r\nHost: x\r\n")  # and never the rest
        assert _read_all(s) == b""  # the server closed it (the socket's own timeout is 20 s)
        # a whole request still works, and so does a second one on the same connection
        s = srv.connect()
        body = b'{"tokenizer": "bpe", "text": "hello"}'
        req = b"POST /api/encode HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
        s.sendall(req % (len(body), body))
        assert _read_response(s).startswith(b"HTTP/1.1 200")
        s.sendall(b"GET / HTTP/1.1\r\nHo")  # the second request's head stops halfway
        assert _read_all(s) == b""
    finally:
        srv.close()


def test_a_slow_body_gets_408(app):
    srv = _Server(app, header_timeout=30)
    try:
        s = srv.connect()
        s.sendall(b'POST /api/encode HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"tok')
        assert _read_all(s).startswith(b"HTTP/1.1 408")
    finally:
        srv.close()


def test_connections_are_bounded(app):
    srv = _Server(app, header_timeout=30, max_connections=4)
    try:
        held = [srv.connect() for _ in range(4)]
        time.sleep(0.2)  # (lets the server accept them; not a timing assertion)
        extra = srv.connect()
        assert _read_all(extra) == b""  # closed at once, past the bound
        for s in held:
            s.close()
    finally:
        srv.close()


def test_a_disconnect_mid_body_is_one_log_line(app, caplog):
    srv = _Server(app, header_timeout=30)
    try:
        with caplog.at_level(logging.WARNING):
            s = srv.connect()
            s.sendall(b'POST /api/encode HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"tok')
            s.close()
            deadline = time.monotonic() + 20
            while not any("disconnected while sending" in r.getMessage() for r in caplog.records):
                assert time.monotonic() < deadline, "no log line for the disconnect"
                time.sleep(0.05)
        lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(lines) == 1 and lines[0].exc_info is None, [r.getMessage() for r in lines]
    finally:
        srv.close()
