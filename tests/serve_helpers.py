"""Helpers for the playground's tests (tests/serve/): small tokenizers of every
family, trained once per session, and a uvicorn server on a free loopback port
in a thread.

Not handled: servers on other interfaces (the tests only use loopback)."""

from __future__ import annotations

import socket
import threading
import time
import warnings

#: the built-in corpus bytes the small tokenizers learn from, and their size
TRAIN_BYTES = 300_000
VOCAB_SIZE = 1024


def small_tokenizers() -> dict:
    """One tokenizer per family (LZ78 chunked and not), as ``tokenforge serve`` trains them, only smaller."""
    import tokenforge
    from tokenforge.serve import default_tokenizers

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tokenforge.TokenforgeWarning)
        return default_tokenizers(vocab_size=VOCAB_SIZE, max_bytes=TRAIN_BYTES)


class LiveServer:
    """``app`` served by uvicorn on 127.0.0.1 at a port the OS picks; ``url`` is its root."""

    def __init__(self, app):
        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30  # a bound on waiting for start-up, not a timing assertion
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)
