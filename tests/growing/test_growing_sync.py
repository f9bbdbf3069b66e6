"""sync(): a remote tokenizer.json is taken only if it extends the local one (loopback server only)."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from growing_helpers import FIXTURE, SOURCE_A, SOURCE_B
from tokenforge import GrowingBPETokenizer
from tokenforge.errors import SyncError
from tokenforge.formats.growing_json import growing_json_text


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep test output clean
        pass

    def do_GET(self):
        route = self.server.routes.get(self.path)
        if route is None:
            self.send_error(404, "not here")
            return
        kind, body = route
        if callable(body):  # a route whose body changes between requests
            body = body()
        if kind == "hang":
            self.server.release.wait(10)
            return
        if kind == "slow-headers":  # the status line, then a header byte now and then, forever
            self.wfile.write(b"HTTP/1.1 200 OK\r\n")
            self.wfile.flush()
            while not self.server.release.wait(0.2):
                try:
                    self.wfile.write(b"X")
                    self.wfile.flush()
                except OSError:
                    return
            return
        if kind in ("drip-chunked", "endless"):  # chunked, no length: a chunk now and then / as fast as it goes
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            piece = b"[" * 65536 if kind == "endless" else b" "
            while not self.server.release.is_set():
                if kind == "drip-chunked" and self.server.release.wait(0.2):
                    return
                try:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    self.wfile.flush()
                except OSError:
                    return
            return
        if kind == "drip":  # headers at once, then a byte now and then
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            for i in range(len(body)):
                if self.server.release.wait(0.2):
                    return
                self.wfile.write(body[i : i + 1])
                self.wfile.flush()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        declared = len(body) * 2 if kind == "short" else len(body)
        self.send_header("Content-Length", str(declared))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        if kind == "short":
            self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # the handler threads end on their own once release is set


@pytest.fixture
def server():
    srv = _Server(("127.0.0.1", 0), _Handler)
    srv.daemon_threads = True
    srv.routes = {}
    srv.release = threading.Event()
    th = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    th.start()
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}"
    try:
        yield srv
    finally:
        srv.release.set()
        srv.shutdown()
        srv.server_close()
        th.join(5)


def _serve(server, name: str, body: bytes, kind: str = "ok") -> str:
    server.routes["/" + name] = (kind, body)
    return f"{server.url}/{name}"


@pytest.fixture
def local(tmp_path):
    """A tokenizer trained on source A, saved to tmp_path/tokenizer.json."""
    t = GrowingBPETokenizer()
    t.learn_merges(iter(SOURCE_A), 60, source="A")
    p = tmp_path / "tokenizer.json"
    t.save(p)
    return t, p


def _extended(t: GrowingBPETokenizer, n: int = 40) -> GrowingBPETokenizer:
    r = GrowingBPETokenizer._from_data(t._data)
    r.learn_merges(iter(SOURCE_B), n, source="B")
    return r


def _text(t: GrowingBPETokenizer) -> bytes:
    return growing_json_text(t._data).encode()


def _unchanged(t, p, before_bytes, before_merges):
    assert p.read_bytes() == before_bytes
    assert t.merge_list == before_merges
    assert sorted(x.name for x in p.parent.iterdir()) == ["tokenizer.json"]  # no temp files left


def test_newer_extending_remote_is_taken(server, local):
    t, p = local
    old_merges = t.merge_list
    ids = t.encode("The fox runs to the garden")
    remote = _extended(t)
    url = _serve(server, "tokenizer.json", _text(remote))
    report = t.sync(url)
    assert report.updated and report.status == "updated"
    assert report.merges_added == 40 and report.old_next_merge_id == 326 and report.new_next_merge_id == 366
    assert report.sources_changed == {"B": 40}
    assert report.written == str(p)
    assert report.sha256 == hashlib.sha256(_text(remote)).hexdigest()
    assert "40 new merges" in str(report)
    assert t.merge_list[: len(old_merges)] == old_merges and t.current_vocab_size == 366
    assert t.decode(ids) == "The fox runs to the garden"
    again = GrowingBPETokenizer.load(p)
    assert again.merge_list == remote.merge_list and again.sources_contributed == {"A": 60, "B": 40}


def test_seed_format_remote_is_taken(server, local):
    t, p = local
    remote = _extended(t, 10)
    doc = {
        "vocab_size": 10_000_000,
        "next_merge_id": remote.next_merge_id,
        "total_tokens_processed": 5,
        "sources_contributed": remote.sources_contributed,
        "merges": {f"{a}_{b}": z for a, b, z in remote.merge_list},
    }
    url = _serve(server, "seed.json", json.dumps(doc, indent=2).encode())
    assert t.sync(url).merges_added == 10
    assert GrowingBPETokenizer.load(p).merge_list == remote.merge_list


@pytest.mark.parametrize("fewer", [0, 25])
def test_older_or_equal_remote_is_ignored(server, local, fewer):
    t, p = local
    before, merges = p.read_bytes(), t.merge_list
    r = GrowingBPETokenizer._from_data(t._data)
    r._set(type(t._data)(pairs=t._data.pairs[: len(t._data.pairs) - fewer]))
    url = _serve(server, "old.json", _text(r))
    report = t.sync(url)
    assert not report.updated and report.merges_added == 0 and report.written is None
    assert report.status == ("up-to-date" if fewer == 0 else "older")
    assert ("ignored" in str(report)) == (fewer > 0)
    _unchanged(t, p, before, merges)


def test_remote_that_rewrites_a_merge_is_refused(server, local):
    t, p = local
    before, merges = p.read_bytes(), t.merge_list
    remote = _extended(t)
    pairs = list(remote._data.pairs)
    pairs[3] = (10 + ord("q"), 10 + ord("q"))
    remote._set(type(remote._data)(pairs=pairs, sources_contributed={"evil": len(pairs)}))
    url = _serve(server, "rewrite.json", _text(remote))
    with pytest.raises(SyncError, match="rewrites existing merge 269"):
        t.sync(url)
    _unchanged(t, p, before, merges)


@pytest.mark.parametrize(
    "body,match",
    [
        (b"{not json", "not valid"),
        (b"[1, 2, 3]", "not valid"),
        (b'{"merges": {"10_11": 300}}', "merges.10_11"),
        (b"\xff\xfe", "UTF-8"),
        (b"", "not valid"),
    ],
)
def test_malformed_remote_is_refused(server, local, body, match):
    t, p = local
    before, merges = p.read_bytes(), t.merge_list
    with pytest.raises(SyncError, match=match):
        t.sync(_serve(server, "bad.json", body))
    _unchanged(t, p, before, merges)


def test_truncated_remote_is_refused(server, local):
    t, p = local
    before, merges = p.read_bytes(), t.merge_list
    body = _text(_extended(t))
    # the JSON itself cut short (the server says so honestly)
    with pytest.raises(SyncError, match="not valid.*truncated or corrupt"):
        t.sync(_serve(server, "cut.json", body[: len(body) // 2]))
    # the transfer cut short (fewer bytes than Content-Length)
    with pytest.raises(SyncError, match="truncated"):
        t.sync(_serve(server, "short.json", body[: len(body) // 2], kind="short"))
    _unchanged(t, p, before, merges)


def test_sha256_is_checked(server, local):
    t, p = local
    before, merges = p.read_bytes(), t.merge_list
    body = _text(_extended(t))
    url = _serve(server, "pinned.json", body)
    with pytest.raises(SyncError, match="sha256 mismatch"):
        t.sync(url, sha256="0" * 64)
    _unchanged(t, p, before, merges)
    with pytest.raises(Exception, match="64 hex digits"):
        t.sync(url, sha256="abc")
    _unchanged(t, p, before, merges)
    assert t.sync(url, sha256=hashlib.sha256(body).hexdigest().upper()).updated


def test_refused_connection(local):
    t, p = local
    before, merges = p.read_bytes(), t.merge_list
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with pytest.raises(SyncError, match="refused"):
        t.sync(f"http://127.0.0.1:{port}/tokenizer.json", timeout=5)
    _unchanged(t, p, before, merges)


@pytest.mark.parametrize("kind", ["hang", "drip", "slow-headers", "drip-chunked"])
def test_timeout_is_a_deadline_for_the_whole_download(server, local, kind):
    """A server that sends headers or body a byte at a time cannot stretch the deadline
    (urllib's own timeout is per read: each byte would restart it)."""
    t, p = local
    before, merges = p.read_bytes(), t.merge_list
    url = _serve(server, "slow.json", _text(_extended(t)), kind=kind)
    start = time.monotonic()
    with pytest.raises(SyncError, match=r"timed out after 0.6 s.*nothing changed"):
        t.sync(url, timeout=0.6)
    assert time.monotonic() - start < 3 * 0.6  # an upper bound on the behaviour, not a benchmark
    _unchanged(t, p, before, merges)


def test_http_error(server, local):
    t, p = local
    before, merges = p.read_bytes(), t.merge_list
    with pytest.raises(SyncError, match="HTTP 404"):
        t.sync(server.url + "/missing.json")
    with pytest.raises(SyncError, match="unsupported URL scheme"):
        t.sync("ftp://127.0.0.1/x.json")
    _unchanged(t, p, before, merges)


def test_other_pattern_is_refused(server, local):
    t, p = local
    before, merges = p.read_bytes(), t.merge_list
    other = GrowingBPETokenizer(pattern="gpt2")
    other.learn_merges(iter(SOURCE_A), 100)
    with pytest.raises(SyncError, match="split pattern"):
        t.sync(_serve(server, "gpt2.json", _text(other)))
    _unchanged(t, p, before, merges)


def test_sync_from_a_path_and_a_file_url(tmp_path, local):
    t, p = local
    remote = _extended(t)
    src = tmp_path / "remote" / "tokenizer.json"
    remote.save(src)
    assert t.sync(src).updated
    assert GrowingBPETokenizer.load(p).merge_list == remote.merge_list
    assert t.sync(src.as_uri()).status == "up-to-date"
    with pytest.raises(SyncError, match="no such file"):
        t.sync(tmp_path / "nope.json")


def test_sync_in_memory_and_to_another_path(server, tmp_path):
    t = GrowingBPETokenizer()
    remote = GrowingBPETokenizer.load(FIXTURE)
    url = _serve(server, "fixture.json", FIXTURE.read_bytes())
    report = t.sync(url)
    assert report.updated and report.written is None and t.path is None
    assert t.encode("Hello, world!") == [285, 270, 121, 54, 42, 129, 268, 290, 43]
    u = GrowingBPETokenizer()
    out = tmp_path / "new" / "tokenizer.json"
    assert u.sync(url, path=out).written == str(out)
    assert GrowingBPETokenizer.load(out).merge_list == remote.merge_list


def test_crash_while_replacing_leaves_everything(server, local, monkeypatch):
    t, p = local
    before, merges = p.read_bytes(), t.merge_list
    url = _serve(server, "ok.json", _text(_extended(t)))

    def boom(*a, **k):
        raise OSError("power cut")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="power cut"):
        t.sync(url)
    _unchanged(t, p, before, merges)


def test_endless_stream_is_cut_at_the_limit_with_bounded_memory(server, local):
    import tracemalloc

    t, p = local
    before, merges = p.read_bytes(), t.merge_list
    url = _serve(server, "endless.json", b"", kind="endless")
    tracemalloc.start()
    try:
        with pytest.raises(SyncError, match="exceeds the 8000000-byte limit"):
            t.sync(url, max_bytes=8_000_000, timeout=30)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000  # streamed to a temporary file, not held in memory
    _unchanged(t, p, before, merges)
    with pytest.raises(Exception, match="max_bytes"):
        t.sync(url, max_bytes=0)


def test_size_limit(server, local):
    t, p = local
    before, merges = p.read_bytes(), t.merge_list
    url = _serve(server, "big.json", _text(_extended(t)))
    with pytest.raises(SyncError, match="limit"):
        t.sync(url, max_bytes=100)
    _unchanged(t, p, before, merges)
