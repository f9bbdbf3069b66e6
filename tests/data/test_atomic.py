"""Atomic writes keep the file's identity: umask mode for new files, the old mode for replaced
ones, symlinks followed to their target, and stale temporaries of interrupted saves cleaned."""

from __future__ import annotations

import errno
import os
import signal
import stat
import subprocess
import sys
import time

import numpy as np
import pytest

from tokenforge.formats import atomic
from tokenforge.formats.atomic import STALE_SECONDS, atomic_open, atomic_write, clean_stale_temporaries


def _mode(p) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


@pytest.fixture
def umask022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def test_new_file_gets_the_umask_mode(tmp_path, umask022):
    atomic_write(tmp_path / "a.json", "{}")
    assert _mode(tmp_path / "a.json") == 0o644
    os.umask(0o077)
    atomic_write(tmp_path / "b.json", "{}")
    assert _mode(tmp_path / "b.json") == 0o600


def test_replaced_file_keeps_its_mode(tmp_path, umask022):
    p = tmp_path / "tok.json"
    p.write_text("old")
    for mode in (0o644, 0o640, 0o600, 0o664):
        os.chmod(p, mode)
        atomic_write(p, "new")
        assert p.read_text() == "new" and _mode(p) == mode


def test_symlink_target_is_written_and_link_kept(tmp_path, umask022):
    real_dir = tmp_path / "store"
    real_dir.mkdir()
    target = real_dir / "tok.json"
    target.write_text("old")
    os.chmod(target, 0o640)
    link = tmp_path / "current.json"
    link.symlink_to(os.path.relpath(target, tmp_path))
    atomic_write(link, "new")
    assert link.is_symlink() and target.read_text() == "new" and _mode(target) == 0o640
    # a chain of links, and a dangling link that creates its target
    link2 = tmp_path / "alias.json"
    link2.symlink_to(link)
    atomic_write(link2, "newer")
    assert link2.is_symlink() and link.is_symlink() and target.read_text() == "newer"
    dangling = tmp_path / "later.json"
    dangling.symlink_to(real_dir / "later-target.json")
    atomic_write(dangling, "x")
    assert dangling.is_symlink() and (real_dir / "later-target.json").read_text() == "x"
    assert sorted(x.name for x in real_dir.iterdir()) == ["later-target.json", "tok.json"]  # no temp files


def test_stale_temporaries_are_removed_live_ones_kept(tmp_path):
    p = tmp_path / "tok.json"
    # a writer that is gone: a pid that exited
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    gone = tmp_path / f".tok.json.tf{dead_pid}-{atomic._host_tag()}-abcd1234.tmp"
    gone.write_text("half")
    # a concurrent writer that is alive (this process's parent) on this host: kept even when old
    alive = tmp_path / f".tok.json.tf{os.getppid()}-{atomic._host_tag()}-abcd1234.tmp"
    alive.write_text("in progress")
    # another host's writer: kept while recent, removed once untouched for STALE_SECONDS
    other_recent = tmp_path / ".tok.json.tf1-otherhost-00ff.tmp"
    other_old = tmp_path / ".tok.json.tf2-otherhost-00ff.tmp"
    legacy_old = tmp_path / ".tok.json.k2j_9xq1.tmp"  # tempfile.mkstemp's name, from older versions
    for f in (other_recent, other_old, legacy_old):
        f.write_text("x")
    old = time.time() - STALE_SECONDS - 60
    for f in (other_old, legacy_old):
        os.utime(f, (old, old))
    # not ours or not this target's: never touched
    strangers = [
        tmp_path / ".tok.json.notes.tmp",
        tmp_path / ".other.json.tf1-otherhost-00ff.tmp",
        tmp_path / "tok.json.tmp",
    ]
    for f in strangers:
        f.write_text("keep")
        os.utime(f, (old, old))
    atomic_write(p, "data")
    left = {x.name for x in tmp_path.iterdir()}
    assert gone.name not in left and other_old.name not in left and legacy_old.name not in left
    assert {alive.name, other_recent.name, "tok.json"} | {s.name for s in strangers} == left
    # the live writer's file stays however old it is, as long as its pid runs... up to STALE_SECONDS
    assert clean_stale_temporaries(p, now=time.time()) == []


def test_sigkill_during_save_leaves_a_temp_that_the_next_save_removes(tmp_path):
    p = tmp_path / "tok.json"
    code = (
        "import sys, time\n"
        "from tokenforge.formats.atomic import atomic_open\n"
        "with atomic_open(sys.argv[1], 'wb') as f:\n"
        "    f.write(b'half'); f.flush(); print('writing', flush=True); time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(p)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "writing"
        assert len([x for x in tmp_path.iterdir() if x.name.endswith(".tmp")]) == 1
        # while the writer lives, another save leaves its temporary alone
        atomic_write(p, "first")
        assert len([x for x in tmp_path.iterdir() if x.name.endswith(".tmp")]) == 1
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        proc.stdout.close()
    atomic_write(p, "second")
    assert sorted(x.name for x in tmp_path.iterdir()) == ["tok.json"] and p.read_text() == "second"


def test_failure_names_the_target_and_leaves_nothing(tmp_path, monkeypatch):
    p = tmp_path / "tok.json"
    p.write_text("old")
    with pytest.raises(OSError) as e:
        with atomic_open(p, "wb") as f:
            f.write(b"new")
            raise OSError(errno.ENOSPC, "No space left on device")
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(p)
    assert p.read_text() == "old" and sorted(x.name for x in tmp_path.iterdir()) == ["tok.json"]


def test_read_only_directory_names_the_target(tmp_path, monkeypatch):
    d = tmp_path / "ro"
    d.mkdir()
    os.chmod(d, 0o555)
    if os.geteuid() == 0:  # root ignores directory permissions: refuse as the kernel would for a user
        real_open = os.open

        def refuse(path, *a, **k):
            if os.path.dirname(os.fspath(path)) == str(d):
                raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
            return real_open(path, *a, **k)

        monkeypatch.setattr(atomic.os, "open", refuse)
    try:
        with pytest.raises(PermissionError) as e:
            atomic_write(d / "tok.json", "x")
        assert e.value.filename == str(d / "tok.json")
    finally:
        os.chmod(d, 0o755)


def test_shards_use_the_same_writer(tmp_path, umask022, tiny_bpe):
    from tokenforge.data.shards import pretokenize

    tok = tiny_bpe
    out = tmp_path / "shards"
    pretokenize(iter(["hello world"] * 20), tok, out)
    files = [x for x in out.iterdir()]
    assert files and all(_mode(x) == 0o644 for x in files), [(x.name, oct(_mode(x))) for x in files]
    arr = np.load(next(x for x in files if x.name.endswith(".npy") and ".docs" not in x.name))
    assert arr.size > 0


def test_repeated_saves_list_the_directory_only_when_it_may_hold_something_new(tmp_path, monkeypatch):
    calls = []
    real = os.listdir
    # (os is one module: count only this directory's listings, not other threads' -- a Dask cluster's, say)
    monkeypatch.setattr(
        atomic.os, "listdir", lambda d: (calls.append(d) if str(d) == str(tmp_path) else None) or real(d)
    )
    for i in range(50):  # a shard writer: a new file, then the index, again and again
        atomic_write(tmp_path / f"shard_{i}.npy", b"x", clean=False)
        atomic_write(tmp_path / "index.json", f"{i}")
    assert len(calls) == 1  # linear in the number of saves, not quadratic
    # another process's leftover appears (the directory changes): the next save looks, and removes it
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left = tmp_path / f".index.json.tf{int(dead.stdout)}-{atomic._host_tag()}-0123abcd.tmp"
    left.write_text("half")
    st = os.stat(tmp_path)  # file timestamps tick every few ms: make "later" unambiguous
    os.utime(tmp_path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    atomic_write(tmp_path / "index.json", "next")
    assert len(calls) == 2 and not left.exists()
