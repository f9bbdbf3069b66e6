"""pretokenize(..., client=...): one task per corpus partition, on a LocalRunner
(the distributed code path in this process) and on a real LocalCluster of two
worker processes. Read through ShardSet, the token stream, document boundaries
and byte/character counts must equal the single-machine run's, for every
family; an interrupted client resumes without redoing finished partitions; a
worker killed mid-task changes nothing."""

from __future__ import annotations

import json
import os
import signal
import warnings

import numpy as np
import pytest

import tokenforge
from tokenforge import registry
from tokenforge.cluster import LocalRunner, runner, task_threads
from tokenforge.data import shard_cluster as shards_cluster  # the cluster path of pretokenize
from tokenforge.data import shard_writer
from tokenforge.data.shards import INDEX_FILE, ShardError, ShardSet, pretokenize
from tokenforge.errors import CorpusError, FormatError
from tokenforge.formats.checksum import reseal

# Latin-1 text (the mixedgram family reads Latin-1), several UTF-8 bytes per character in places.
DOCS = [
    f"Doc {i}: "
    + ("the quick brown fox jumps over the lazy dog. " * (i % 5 + 1))
    + ("café naïve Ünïcödé ñ\n" * (i % 3))
    for i in range(48)
] + ["x", "<|bos|> is only text here"]

SEP = "\n\n"  # .txt files: documents separated by a blank line (split_on)


def _write_corpus(d):
    """Four files, .txt and .jsonl, in corpus order; and the documents they hold."""
    d.mkdir(parents=True, exist_ok=True)
    groups = [DOCS[:12], DOCS[12:30], DOCS[30:38], DOCS[38:]]
    files = [d / "a.txt", d / "b.jsonl", d / "c.txt", d / "d.jsonl"]
    for f, g in zip(files, groups):
        if f.suffix == ".txt":
            f.write_text(SEP.join(t.strip("\n") for t in g), encoding="utf-8")
        else:
            f.write_text("".join(json.dumps({"text": t}) + "\n" for t in g), encoding="utf-8")
    return files


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return _write_corpus(tmp_path_factory.mktemp("corpus"))


def _train(family: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tokenforge.TokenforgeWarning)  # a tiny corpus runs out of pairs
        if family == "bpe":
            return tokenforge.BPETokenizer.train_from_iterator(DOCS, 330, progress=False)
        if family == "lz78":
            return tokenforge.LZ78Tokenizer.train_from_iterator(DOCS, 300, strategy="standard", progress=False)
        if family == "mixedgram":
            return tokenforge.Mixedgram.train_from_iterator(DOCS, special_tokens=["<|bos|>"])
        return tokenforge.GrowingBPETokenizer.train_from_iterator(DOCS, 300)


FAMILIES = list(registry.BUILT_IN)


@pytest.fixture(scope="module")
def toks():
    return {f: _train(f) for f in FAMILIES}


OPTS = dict(shard_tokens=150, batch_chars=200, num_threads=2, split_on=SEP, progress=False)


def _view(s: ShardSet):
    """What a reader sees: the token stream, where each document starts in it, and
    each document's byte and character counts (characters: per shard)."""
    assert s.complete
    s.verify()
    tokens = [np.asarray(s.tokens(i)) for i in range(s.num_shards)]
    starts, nbytes, base = [], [], 0
    for i in range(s.num_shards):
        table = s.documents(i)
        starts.extend((table[:, 0] + base).tolist())
        nbytes.extend(table[:, 1].tolist())
        base += len(tokens[i])
    chars = sum(e["num_chars"] for e in s.index["shards"])
    docs = [d.tolist() for d in s.iter_documents()]
    return np.concatenate(tokens).tolist(), starts, nbytes, chars, docs, s.num_bytes


def _single(corpus, tok, out):
    return pretokenize(corpus, tok, out, **OPTS)


@pytest.mark.parametrize("family", FAMILIES)
def test_local_runner_equals_single_machine(tmp_path, corpus, toks, family):
    tok = toks[family]
    one = _single(corpus, tok, tmp_path / "one")
    dist = pretokenize(corpus, tok, tmp_path / "dist", client=LocalRunner(progress=False), **OPTS)
    assert _view(dist) == _view(one)
    assert dist.num_documents == len(DOCS) and dist.num_shards > len(corpus)
    index = json.loads((tmp_path / "dist" / INDEX_FILE).read_text())
    assert index["format"] == "tokenforge-shards" and index["version"] == 3 and index["complete"]
    assert [p["dir"] for p in index["source"]["partitions"]] == [f"part_{i:05d}" for i in range(len(corpus))]
    assert [p["path"] for p in index["source"]["partitions"]] == [str(f) for f in corpus]
    assert all(e["tokens"].startswith("part_0000") for e in index["shards"])
    assert index["tokenizer"] == one.index["tokenizer"]
    # each partition's directory is a shard set of its own, with the partition as its source
    sub = ShardSet(tmp_path / "dist" / "part_00001")
    assert sub.complete and sub.index["version"] == 2 and sub.index["source"]["kind"] == "partition"
    assert sub.index["source"]["path"] == str(corpus[1])
    dist.check_tokenizer(tok)


def test_a_directory_and_a_str_path_give_the_same_partitions(tmp_path, corpus, toks):
    tok = toks["bpe"]
    one = _single(corpus[0].parent, tok, tmp_path / "one")
    dist = pretokenize(str(corpus[0].parent), tok, tmp_path / "dist", client=LocalRunner(progress=False), **OPTS)
    assert _view(dist) == _view(one)
    assert len(dist.index["source"]["partitions"]) == len(corpus)


class _Recorder:
    """Wraps the task function: records the partitions it encodes; stops the run
    (KeyboardInterrupt, as a Ctrl-C of the client) when it reaches partition ``stop_at``."""

    def __init__(self, real, stop_at=None):
        self.real, self.stop_at, self.seen = real, stop_at, []

    def __call__(self, part, *args):
        if part.index == self.stop_at:
            raise KeyboardInterrupt
        self.seen.append(part.index)
        return self.real(part, *args)


def _mtimes(d):
    return {p.relative_to(d).as_posix(): p.stat().st_mtime_ns for p in sorted(d.rglob("*")) if p.is_file()}


def test_interrupted_client_resumes_without_redoing_finished_partitions(tmp_path, corpus, toks, monkeypatch):
    tok, out = toks["lz78"], tmp_path / "dist"
    real = shards_cluster._encode_partition
    first = _Recorder(real, stop_at=2)
    monkeypatch.setattr(shards_cluster, "_encode_partition", first)
    with pytest.raises(KeyboardInterrupt):
        pretokenize(corpus, tok, out, client=LocalRunner(progress=False), **OPTS)
    assert first.seen == [0, 1]
    partial = ShardSet(out, allow_incomplete=True)  # lists the shards of the finished partitions that begin the corpus
    assert not partial.complete and {e["tokens"][:10] for e in partial.index["shards"]} == {"part_00000", "part_00001"}
    assert [d.tolist() for d in partial.iter_documents()] == _view(_single(corpus[:2], tok, tmp_path / "two"))[4]
    done = {name: _mtimes(out / name) for name in ("part_00000", "part_00001")}
    assert all(done.values())

    second = _Recorder(real)
    monkeypatch.setattr(shards_cluster, "_encode_partition", second)
    dist = pretokenize(corpus, tok, out, client=LocalRunner(progress=False), **OPTS)
    assert second.seen == [2, 3]  # only the partitions that had not finished
    assert {name: _mtimes(out / name) for name in done} == done  # finished ones untouched
    assert _view(dist) == _view(_single(corpus, tok, tmp_path / "one"))

    third = _Recorder(real)
    monkeypatch.setattr(shards_cluster, "_encode_partition", third)
    again = pretokenize(corpus, tok, out, client=LocalRunner(progress=False), **OPTS)
    assert third.seen == [] and _view(again) == _view(dist)


def test_a_partition_interrupted_midway_resumes_inside_it(tmp_path, corpus, toks, monkeypatch):
    """The state a dead worker leaves: a partition with some shards listed, a
    temporary file and an unlisted shard; the next run continues it."""
    tok, out = toks["bpe"], tmp_path / "dist"
    dist = pretokenize(corpus, tok, out, client=LocalRunner(progress=False), **OPTS)
    want = _view(dist)
    sub = out / "part_00001"
    index = json.loads((sub / INDEX_FILE).read_text())
    assert len(index["shards"]) >= 3
    kept = index["shards"][:1]
    for e in index["shards"][2:]:  # shard 1 stays on disk, unlisted; later ones are gone
        (sub / e["tokens"]).unlink()
        (sub / e["documents"]).unlink()
    (sub / ".shard_00002.npy.123.tmp").write_bytes(b"half")
    index.pop("checksum")
    index.update(shards=kept, complete=False)
    (sub / INDEX_FILE).write_text(json.dumps(index))
    reseal(sub / INDEX_FILE)
    top = json.loads((out / INDEX_FILE).read_text())
    top.pop("checksum")
    top.update(shards=[], complete=False)
    (out / INDEX_FILE).write_text(json.dumps(top))
    reseal(out / INDEX_FILE)
    before = _mtimes(sub)["shard_00000.npy"]
    rec = _Recorder(shards_cluster._encode_partition)
    monkeypatch.setattr(shards_cluster, "_encode_partition", rec)
    again = pretokenize(corpus, tok, out, client=LocalRunner(progress=False), **OPTS)
    assert rec.seen == [1] and _view(again) == want
    assert _mtimes(sub)["shard_00000.npy"] == before  # the listed shard was kept, not rewritten
    assert not list(sub.glob(".*.tmp"))


def test_mismatches_are_refused_and_overwrite_starts_again(tmp_path, corpus, toks):
    out, local = tmp_path / "dist", LocalRunner(progress=False)
    pretokenize(corpus, toks["bpe"], out, client=local, **OPTS)
    with pytest.raises(ShardError, match="different tokenizer"):
        pretokenize(corpus, toks["lz78"], out, client=local, **OPTS)
    with pytest.raises(ShardError, match="different shard_tokens"):
        pretokenize(corpus, toks["bpe"], out, client=local, **{**OPTS, "shard_tokens": 99})
    with pytest.raises(ShardError, match="different source"):
        pretokenize(corpus[:3], toks["bpe"], out, client=local, **OPTS)
    with pytest.raises(ShardError, match="different source"):  # the single-machine path does not resume it
        pretokenize(corpus, toks["bpe"], out, **OPTS)
    with pytest.raises(ShardError, match="different source"):  # nor this path a single-machine directory
        pretokenize(corpus, toks["bpe"], tmp_path / "one", **OPTS)
        pretokenize(corpus, toks["bpe"], tmp_path / "one", client=local, **OPTS)
    # overwrite with the single-machine path: the partition sub-directories go
    one = pretokenize(corpus, toks["lz78"], out, overwrite=True, **OPTS)
    assert not list(out.glob("part_*")) and one.index["version"] == 2
    want = _view(one)
    # and back: top-level shard files go
    dist = pretokenize(corpus, toks["lz78"], out, client=local, overwrite=True, **OPTS)
    assert not list(out.glob("shard_*")) and _view(dist) == want


def _big_jsonl(path, mb: int):
    """A .jsonl file of about ``mb`` MB (lines of ~1 kB)."""
    line = json.dumps({"text": "lorem ipsum dolor sit amet " * 37}) + "\n"
    path.write_text(line * (mb * 1_000_000 // len(line) + 1), encoding="utf-8")
    return path


def test_auto_plan_gives_several_partitions_per_worker_thread(tmp_path):
    from tokenforge.data.partition import MIN_AUTO_TARGET_BYTES, auto_target_bytes

    big = _big_jsonl(tmp_path / "big.jsonl", 20)
    one = shards_cluster._plan(big, None, threads=LocalRunner().threads)  # LocalRunner: 1 worker, 1 thread
    assert len(one) >= 4 and all(p.nbytes <= big.stat().st_size // 4 + 2000 for p in one)
    assert len(shards_cluster._plan(big, None, threads=2)) == 5  # 2.5 MB each would be below the 4 MB floor
    assert auto_target_bytes(big, 1) == -(-big.stat().st_size // 4)
    assert auto_target_bytes(big, 64) == MIN_AUTO_TARGET_BYTES
    assert len(shards_cluster._plan(big, 1 << 30, threads=1)) == 1  # partition_bytes given: as asked


def test_count_pieces_plans_several_partitions_per_worker_thread(tmp_path, monkeypatch):
    from tokenforge import counting

    big = _big_jsonl(tmp_path / "big.jsonl", 17)
    planned = []
    real = counting.plan_partitions
    monkeypatch.setattr(counting, "plan_partitions", lambda *a, **k: planned.append(real(*a, **k)) or planned[-1])
    monkeypatch.setattr(counting, "count_partition", lambda part, *rest: counting._core.WordCounter(rest[0]))
    counting.count_pieces(big, r"\S+", client=LocalRunner(progress=False))
    assert len(planned[0]) >= 4


def test_a_finished_job_keeps_its_recorded_partitions(tmp_path, corpus, toks):
    """Without partition_bytes the plan depends on the cluster's size: a run
    again (resume, or nothing left to do) keeps the partitions recorded."""
    out, local = tmp_path / "dist", LocalRunner(progress=False)
    first = pretokenize(corpus, toks["bpe"], out, client=local, partition_bytes=300, **OPTS)
    assert len(first.index["source"]["partitions"]) > len(corpus)
    again = pretokenize(corpus, toks["bpe"], out, client=local, **OPTS)
    assert again.index == first.index
    files = [os.path.abspath(f) for f in corpus]
    assert shards_cluster._plan(corpus, None, resume=out) == shards_cluster._recorded_plan(out, files)
    assert shards_cluster._recorded_plan(out, files[:3]) is None  # another corpus: planned afresh, then refused
    with pytest.raises(ShardError, match="different source"):
        pretokenize(corpus[:3], toks["bpe"], out, client=local, **OPTS)


@pytest.mark.parametrize("family", ["bpe", "mixedgram"])
def test_byte_ranges_of_jsonl_equal_single_machine(tmp_path, corpus, toks, family):
    """Partitions inside .jsonl files go through the block encoder from their
    byte offset (BPE) or the Python reader (families without one); the same result."""
    tok = toks[family]
    dist = pretokenize(corpus, tok, tmp_path / "dist", client=LocalRunner(progress=False), partition_bytes=250, **OPTS)
    assert any(p["start"] > 0 and p["path"].endswith(".jsonl") for p in dist.index["source"]["partitions"])
    assert _view(dist) == _view(_single(corpus, tok, tmp_path / "one"))


def test_a_worker_fingerprints_the_tokenizer_once_per_job(tmp_path, corpus, toks, monkeypatch):
    calls = []
    real = shards_cluster.tokenizer_fingerprint
    counted = lambda *a, **k: calls.append(1) or real(*a, **k)  # noqa: E731
    monkeypatch.setattr(shards_cluster, "tokenizer_fingerprint", counted)  # the workers'
    monkeypatch.setattr(shard_writer, "tokenizer_fingerprint", counted)  # the client's settings
    local = LocalRunner(progress=False)
    dist = pretokenize(corpus, toks["bpe"], tmp_path / "a", client=local, partition_bytes=250, **OPTS)
    # once on the client (the settings), once on the worker for all its partitions
    assert len(dist.index["source"]["partitions"]) > 4 and len(calls) == 2
    pretokenize(corpus, toks["lz78"], tmp_path / "b", client=local, partition_bytes=250, **OPTS)
    assert len(calls) == 4  # another job: fingerprinted again


def test_a_bad_line_in_a_byte_range_names_its_line(tmp_path, toks):
    lines = [json.dumps({"text": f"document number {i} " * 5}) + "\n" for i in range(60)]
    lines[41] = '{"text": "unterminated\n'
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(CorpusError, match=r"line 42\b") as single:
        pretokenize(path, toks["bpe"], tmp_path / "one", progress=False)
    with pytest.raises(CorpusError, match=r"line 42\b") as dist:
        pretokenize(path, toks["bpe"], tmp_path / "dist", client=LocalRunner(progress=False), partition_bytes=1000)
    assert str(dist.value) == str(single.value)


def test_client_needs_files_and_a_local_destination(tmp_path, corpus, toks):
    local, tok = LocalRunner(progress=False), toks["bpe"]
    with pytest.raises(ShardError, match="reads files"):
        pretokenize(iter(DOCS), tok, tmp_path / "x", client=local)
    with pytest.raises(CorpusError, match="is not an existing file or directory"):
        pretokenize(DOCS, tok, tmp_path / "x", client=local)  # a list of str names files, never texts
    for url in ("s3://bucket/shards", "file://otherhost/tmp/x", "memory://x"):
        with pytest.raises(ShardError, match="only local directories"):
            pretokenize(corpus, tok, url, client=local)
    with pytest.raises(ShardError, match=r"client=\.\.\.\) only"):
        pretokenize(corpus, tok, tmp_path / "x", partition_bytes=1000)
    with pytest.raises(ShardError, match="partition_bytes"):
        pretokenize(corpus, tok, tmp_path / "x", client=local, partition_bytes=0)
    s = pretokenize(corpus, tok, (tmp_path / "url dir").as_uri(), client=local, **OPTS)
    assert s.dir == tmp_path / "url dir" and s.complete


def _edit_index(path, fn):
    index = json.loads(path.read_text())
    index.pop("checksum")
    fn(index)
    path.write_text(json.dumps(index))
    reseal(path)


@pytest.mark.parametrize(
    "name", ["../shard_00000.npy", "/etc/passwd", "part_00000/../x.npy", "a/b/shard.npy", ".hidden/s.npy", "a\\b.npy"]
)
def test_reader_refuses_paths_out_of_the_directory(tmp_path, corpus, toks, name):
    out = tmp_path / "dist"
    pretokenize(corpus, toks["bpe"], out, client=LocalRunner(progress=False), **OPTS)
    _edit_index(out / INDEX_FILE, lambda ix: ix["shards"][0].update(tokens=name))
    with pytest.raises(FormatError, match="file name in the shard directory or one sub-directory"):
        ShardSet(out)


def test_version_2_index_takes_no_sub_directory_and_links_out_are_refused(tmp_path, corpus, toks):
    out = tmp_path / "dist"
    pretokenize(corpus, toks["bpe"], out, client=LocalRunner(progress=False), **OPTS)
    good = json.loads((out / INDEX_FILE).read_text())
    _edit_index(out / INDEX_FILE, lambda ix: ix.update(version=2))
    with pytest.raises(FormatError, match="file name in the shard directory"):
        ShardSet(out)
    (out / INDEX_FILE).write_text(json.dumps(good))
    elsewhere = tmp_path / "elsewhere"
    (out / "part_00000").rename(elsewhere)
    os.symlink(elsewhere, out / "part_00000")
    with pytest.raises(FormatError, match="leads out of"):
        ShardSet(out)  # (the files' sizes are checked at open)


# ---------------------------------------------------------------------------
# a real cluster: two worker processes
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (port and resource notices of a local cluster)
        lc = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
        client = distributed.Client(lc)
    try:
        yield client
    finally:
        client.close()
        lc.close()


def test_cluster_equals_single_machine_for_every_family(tmp_path, corpus, toks, cluster):
    for family in FAMILIES:
        tok = toks[family]
        one = _single(corpus, tok, tmp_path / family / "one")
        # (the scheduler's address for one family: the client= str path, connected and closed by pretokenize)
        client = cluster.scheduler.address if family == "lz78" else cluster
        dist = pretokenize(corpus, tok, tmp_path / family / "dist", client=client, **OPTS)
        assert _view(dist) == _view(one), family
    # num_threads=None: one encoding thread per task on a cluster (a worker thread is a core), all cores here
    assert task_threads(runner(cluster), None) == 1 and task_threads(runner(cluster), 3) == 3
    assert task_threads(LocalRunner(), None) is None
    # a task's error reaches the client as itself, naming the file and line; nothing is marked complete
    bad = tmp_path / "bad"
    files = _write_corpus(bad)
    files[3].write_text(files[3].read_text() + '{"text": 1}\n')
    with pytest.raises(CorpusError, match=r"d\.jsonl, line 13"):
        pretokenize(files, toks["bpe"], bad / "dist", client=cluster, **OPTS)
    assert not ShardSet(bad / "dist", allow_incomplete=True).complete


class KillOnce(tokenforge.BPETokenizer):
    """A BPE tokenizer whose encode_batch_flat kills its own process (SIGKILL) on its
    third call in a process, once per marker file (created first, exclusively,
    holding the pid): one worker dies in the middle of a partition, after it has
    written some of its shards."""

    marker: str = ""

    def jsonl_block_encoder(self):
        return None  # every document through encode_batch_flat

    def transport_state(self) -> dict:
        return {**super().transport_state(), "marker": self.marker}

    @classmethod
    def from_bytes(cls, data: bytes, state: dict):
        state = dict(state)
        marker = state.pop("marker", "")
        tok = super().from_bytes(data, state)
        tok.marker = marker
        return tok

    calls = 0

    def encode_batch_flat(self, *args, **kwargs):
        KillOnce.calls += 1
        if self.marker and KillOnce.calls == 3:
            try:
                fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass
            else:
                os.write(fd, str(os.getpid()).encode())
                os.close(fd)
                os.kill(os.getpid(), signal.SIGKILL)
        return super().encode_batch_flat(*args, **kwargs)


def test_a_worker_killed_mid_task_changes_nothing(tmp_path, corpus, toks, cluster):
    base = toks["bpe"]
    killer = KillOnce.from_bytes(base.to_bytes(), {**base.transport_state(), "marker": str(tmp_path / "killed")})
    pids = set(cluster.run(os.getpid).values())
    dist = pretokenize(corpus, killer, tmp_path / "dist", client=cluster, **OPTS)
    dead = int((tmp_path / "killed").read_text())
    assert dead in pids  # a worker of the cluster killed itself during the job ...
    assert dead not in set(cluster.run(os.getpid).values())  # ... and was replaced
    assert _view(dist) == _view(_single(corpus, base, tmp_path / "one"))
