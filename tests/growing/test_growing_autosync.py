"""auto_sync() and ``grow sync --every``: periodic sync against a loopback server (seed 002's
"training nodes auto-update their tokenizers")."""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time

import pytest
from test_growing_sync import _extended, _serve, _text, server  # noqa: F401  (server is a fixture)

from growing_helpers import SOURCE_A
from tokenforge import GrowingBPETokenizer
from tokenforge.cli import grow
from tokenforge.errors import SyncError

TEXT = "Extraordinary gardeners cultivate wonderful, sprawling, magnificent vegetable plantations.\n" * 3


@pytest.fixture
def local(tmp_path):
    t = GrowingBPETokenizer()
    t.learn_merges(iter(SOURCE_A), 40, source="A")
    p = tmp_path / "tokenizer.json"
    t.save(p)
    return t, p


def _versions(t: GrowingBPETokenizer, n: int, step: int = 3) -> list[GrowingBPETokenizer]:
    """n remotes, each extending the one before by `step` merges."""
    out = []
    cur = GrowingBPETokenizer._from_data(t._data)
    for k in range(n):
        nxt = GrowingBPETokenizer._from_data(cur._data)
        nxt.learn_merges(iter([TEXT]), step, source=f"B{k}", min_frequency=1)
        assert nxt.current_vocab_size > cur.current_vocab_size
        out.append(nxt)
        cur = nxt
    return out


def test_an_update_is_picked_up_and_written(server, local):
    t, p = local
    v1, v2 = _versions(t, 2)
    body = {"doc": _text(v1)}
    url = _serve(server, "tok.json", lambda: body["doc"])
    seen = []
    with t.auto_sync(url, interval=0.05, on_update=seen.append) as h:
        assert h.wait_for_checks(1, timeout=30)
        assert t.merge_list == v1.merge_list and GrowingBPETokenizer.load(p).merge_list == v1.merge_list
        body["doc"] = _text(v2)
        n = h.checks
        assert h.wait_for_checks(n + 2, timeout=30)
        assert t.merge_list == v2.merge_list and GrowingBPETokenizer.load(p).merge_list == v2.merge_list
        assert h.updates == 2 and [r.new_next_merge_id for r in seen] == [v1.next_merge_id, v2.next_merge_id]
        assert h.last_report.status == "up-to-date" and h.failures == 0
    assert not h.running


def test_a_bad_remote_is_ignored_with_backoff(server, local, caplog):
    t, p = local
    before, merges = p.read_bytes(), t.merge_list
    good = _extended(t, 10)
    bad = _extended(t, 10)
    pairs = list(bad._data.pairs)
    pairs[2] = (10 + ord("q"), 10 + ord("q"))
    bad._set(type(bad._data)(pairs=pairs))
    body = {"doc": _text(bad)}
    url = _serve(server, "tok.json", lambda: body["doc"])
    caplog.set_level(logging.INFO, logger="tokenforge.growing")
    h = t.auto_sync(url, interval=0.02, max_backoff=0.16)
    try:
        assert h.wait_for_checks(4, timeout=30)
        assert (
            h.failures >= 4 and isinstance(h.last_error, SyncError) and "rewrites existing merge" in str(h.last_error)
        )
        assert h.next_delay == min(0.02 * 2**h.failures, 0.16)  # exponential, capped
        assert t.merge_list == merges and p.read_bytes() == before  # the old vocabulary is kept
        assert any(
            "auto-sync" in r.message and "failed" in r.message and r.levelno == logging.WARNING for r in caplog.records
        )
        body["doc"] = _text(good)  # the server is fixed: the next check takes it and the backoff resets
        n = h.checks
        assert h.wait_for_checks(n + 1, timeout=30)
        assert h.wait_for_checks(h.checks + 1, timeout=30)
        assert t.merge_list == good.merge_list and h.failures == 0 and h.next_delay == 0.02
    finally:
        assert h.stop(timeout=30)


def test_stop_joins_promptly_also_during_a_download(server, local):
    t, p = local
    url = _serve(server, "tok.json", _text(_extended(t)))
    h = t.auto_sync(url, interval=3600)
    assert h.wait_for_checks(1, timeout=30) and h.updates == 1
    assert h.stop(timeout=10) and not h.running  # waiting an hour for the next check: stop ends the wait
    t2 = GrowingBPETokenizer._from_data(t._data)
    slow = _serve(server, "slow.json", b"", kind="slow-headers")
    h = t2.auto_sync(slow, interval=3600, timeout=600)
    time.sleep(0.3)  # let the download start (not an assertion on time)
    assert h.stop(timeout=10) and not h.running  # the download is cut off, not waited for
    assert h.checks == 1 and h.last_error is None  # a cancelled check is not a failure


def test_concurrent_encode_sees_the_old_or_the_new_vocabulary(server, local):
    t, _ = local
    versions = _versions(t, 6)
    expected = {tuple(GrowingBPETokenizer._from_data(t._data).encode(TEXT))}
    expected |= {tuple(v.encode(TEXT)) for v in versions}
    assert len(expected) == 7  # each version encodes the text differently
    served = iter(versions)
    last = {"doc": None}

    def next_version():
        v = next(served, None)
        if v is not None:
            last["doc"] = _text(v)
        return last["doc"]

    url = _serve(server, "tok.json", next_version)
    stop = threading.Event()
    seen, wrong = set(), []

    def encoder():
        while not stop.is_set():
            for ids in [t.encode(TEXT), *t.encode([TEXT, TEXT])]:
                if tuple(ids) not in expected or t.decode(ids) != TEXT:
                    wrong.append(ids)
                seen.add(tuple(ids))

    threads = [threading.Thread(target=encoder) for _ in range(2)]
    for th in threads:
        th.start()
    h = t.auto_sync(url, interval=0.01)
    try:
        assert h.wait_for_checks(8, timeout=60)
        assert h.updates == 6 and t.merge_list == versions[-1].merge_list
    finally:
        h.stop(timeout=30)
        stop.set()
        for th in threads:
            th.join(30)
    assert not wrong
    assert tuple(versions[-1].encode(TEXT)) in seen


def test_arguments_are_checked_in_the_callers_thread(local):
    t, _ = local
    for kw in (
        {"interval": 0},
        {"interval": -1},
        {"interval": 10, "max_backoff": 5},
        {"interval": 1, "timeout": 0},
        {"interval": 1, "max_bytes": 0},
        {"interval": 1, "sha256": "abc"},
    ):
        with pytest.raises(Exception, match="interval|max_backoff|timeout|max_bytes|sha256"):
            t.auto_sync("http://127.0.0.1:9/x", **kw)


def test_cli_duration_and_size():
    assert grow.duration("10m") == 600 and grow.duration("600") == 600 and grow.duration("1.5h") == 5400
    assert grow.duration("30s") == 30
    assert grow.size("256M") == 256 << 20 and grow.size("1000") == 1000 and grow.size("2G") == 2 << 30
    for bad in ("0", "10x", "", "-5m"):
        with pytest.raises(Exception, match="duration"):
            grow.duration(bad)
    with pytest.raises(Exception, match="size"):
        grow.size("lots")


def test_cli_max_bytes(server, local, capsys):
    t, p = local
    url = _serve(server, "tok.json", _text(_extended(t)))
    before = p.read_bytes()
    code = grow.main(["sync", "-t", str(p), url, "--max-bytes", "1K"])
    assert code == 1 and "1024-byte limit" in capsys.readouterr().err and p.read_bytes() == before
    assert grow.main(["sync", "-t", str(p), url, "--max_bytes", "64M"]) == 0
    assert "new merges" in capsys.readouterr().out


def test_cli_every_keeps_the_file_current_until_interrupted(server, local):
    t, p = local
    v1, v2 = _versions(t, 2)
    body = {"doc": _text(v1)}
    url = _serve(server, "tok.json", lambda: body["doc"])
    with _sigint_as_in_a_terminal():
        proc = subprocess.Popen(
            # -X faulthandler: if the child hangs, SIGABRT makes it print every thread's stack to stderr
            [
                sys.executable,
                "-X",
                "faulthandler",
                "-m",
                "tokenforge",
                "grow",
                "sync",
                url,
                "-t",
                str(p),
                "--every",
                "0.05",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    try:
        assert "checking every 0.05 s" in proc.stdout.readline()

        def wait_for(v):
            for _ in range(600):  # a bounded wait for the child to write the file
                try:
                    if GrowingBPETokenizer.load(p).merge_list == v.merge_list:
                        return True
                except Exception:
                    pass
                time.sleep(0.05)
            return False

        assert wait_for(v1)
        body["doc"] = _text(v2)
        assert wait_for(v2)
        # the file is replaced before the update is logged: wait (bounded) for both log lines
        logged = b""
        deadline = time.monotonic() + 30
        fd = proc.stderr.fileno()  # raw reads: a buffered readline would hide lines from select
        while logged.count(b"updated from") < 2 and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                logged += chunk
        signals, deliverable = _signal_state(proc.pid)  # read just before the SIGINT, for the failure message
        assert deliverable, f"the child ignores or blocks SIGINT, so Ctrl-C cannot reach it:\n{signals}"
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            others = _processes()
            proc.send_signal(signal.SIGABRT)  # faulthandler dumps the stacks of all threads, then the child dies
            try:
                _, err = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                err = "(no stack dump: the child did not die on SIGABRT either)"
            pytest.fail(
                f"grow sync --every did not end within 60 s of SIGINT\n--- child's signal state before SIGINT\n"
                f"{signals}\n--- child's stderr (after SIGABRT)\n{logged.decode()}{err}\n--- processes\n{others}"
            )
        err = logged.decode() + err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, f"{err}\n--- child's signal state before SIGINT\n{signals}"
    assert "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == "tokenforge grow sync: interrupted"
    assert err.count("updated from") == 2
    assert sorted(x.name for x in p.parent.iterdir()) == ["tokenizer.json"]


@contextlib.contextmanager
def _sigint_as_in_a_terminal():
    """Children started inside get SIGINT as a terminal's foreground job has it: caught by Python, not blocked.

    The signal state crosses exec: an ignored signal stays ignored, a blocked one stays blocked (a caught
    one is reset to the default). A non-interactive shell starts a background job (``cmd &`` in a script,
    ``bash -c 'make test &'``) with SIGINT and SIGQUIT ignored; pytest inherits that, the child inherits
    it from pytest, Python then rightly leaves SIGINT ignored, and the test's Ctrl-C never arrives. So,
    while the child starts, SIGINT here gets a handler that does nothing (this process still does not
    stop on a Ctrl-C, as whoever started it asked) and is unblocked in this thread, the one that forks."""
    old = signal.getsignal(signal.SIGINT)
    if old == signal.SIG_IGN:
        signal.signal(signal.SIGINT, lambda signum, frame: None)
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if old == signal.SIG_IGN:
            signal.signal(signal.SIGINT, old)


def _signal_state(pid: int) -> tuple[str, bool]:
    """The Sig* lines of /proc/PID/status for the process and each of its threads, and whether a SIGINT
    sent to the process is delivered (not ignored, and some thread does not block it). Linux; elsewhere
    a note and True."""
    lines, ignored, blocked = [], False, True
    bit = 1 << (signal.SIGINT - 1)
    try:
        for task in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
            with open(f"/proc/{pid}/task/{task}/status") as f:
                fields = dict(x.split(":", 1) for x in f.read().splitlines() if ":" in x)
            sig = " ".join(f"{k}={fields[k].strip()}" for k in ("SigBlk", "SigIgn", "SigCgt") if k in fields)
            lines.append(f"task {task} ({fields.get('Name', '?').strip()}): {sig}")
            ignored = ignored or bool(int(fields["SigIgn"], 16) & bit)
            blocked = blocked and bool(int(fields["SigBlk"], 16) & bit)
        with open(f"/proc/{pid}/status") as f:
            lines += [x for x in f.read().splitlines() if x.startswith(("ShdPnd", "SigPnd", "SigQ"))]
    except OSError as e:
        lines.append(f"(not readable: {e})")
        return "\n".join(lines), True
    return "\n".join(lines), not ignored and not blocked


def _processes() -> str:
    try:
        return subprocess.run(
            ["ps", "-eo", "pid,ppid,pgid,stat,etime,args"], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return f"(ps failed: {e})"
