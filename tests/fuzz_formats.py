"""Mutation fuzzing of every file format tokenforge reads (shared by
tests/test_fuzz.py and bench/fuzz.py).

:func:`build_cases` writes one small valid file set per format into a
directory; :func:`mutate` changes one file of a case with a few seeded random
edits (bit flips, inserted/deleted/duplicated bytes, truncation, changed
digits, huge numbers, deep nesting, lone surrogate escapes, comment lines
stripped, files cut after a line, ...); shard directories are fuzzed in their
index and in their sealed files (token arrays, document tables, .npy headers);
:func:`try_load` loads a mutated copy and classifies the outcome:

``error``      a TokenforgeError subclass (what must happen to a broken file);
``equal``      it loaded and is the same tokenizer (or shard data) as before;
``different``  it loaded as something else. For our own formats this must not
               happen once their content carries a checksum (issue 10 item 8);
               foreign formats are only checked structurally, so there it is
               counted, not a failure;
``outside``    any other exception: an error outside the hierarchy.

Hangs and aborts are the caller's to detect (the test uses an alarm, the
bench script runs loads in worker processes).

Not handled: mutations across several files of one case at once (only one
file of a case is changed per trial), and file-system level faults
(permissions, symlinks), which have tests of their own.
"""

from __future__ import annotations

import hashlib
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import tokenforge as tf
from tokenforge.errors import TokenforgeError

__all__ = [
    "Case",
    "SPECS",
    "build_cases",
    "write_examples",
    "read_cases",
    "mutate",
    "try_load",
    "MUTATIONS",
    "case_by_name",
]

_TEXTS = [
    "The quick brown fox jumps over the lazy dog. " * 3,
    "def f(x):\n    return x ** 2  # squares\n" * 2,
    "Ünïcödé — “quotes”, 日本語, emoji 🙂, tabs\tand  spaces.\n",
    "hello world, hello tokenizer; the the the then there 12345 67890\n" * 3,
]
_PROBE = "The quick brown fox, 日本語 🙂 and 12345 hello there.\n\tdef f(): return 0"


@dataclass
class Case:
    """One format: the files of a small valid example (relative path -> bytes),
    which of them fuzzing mutates, how to load the directory, and whether the
    format is tokenforge's own."""

    name: str
    own: bool
    files: dict[str, bytes]
    targets: list[str]
    load: Callable[[Path], object]
    reference: str = ""  # digest of what the unmutated files load as
    extra: dict = field(default_factory=dict)

    def write(self, directory: Path, changed: dict[str, bytes] | None = None) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        for rel, data in {**self.files, **(changed or {})}.items():
            p = directory / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        return directory


# ---------------------------------------------------------------- what a load gives
def digest(obj) -> str:
    """What a loaded object is, as one hash: a tokenizer's class, vocabulary
    (every id's bytes), special tokens, ids of a probe text and saved form;
    a shard set's index and documents."""
    from tokenforge.data.shards import ShardSet

    h = hashlib.sha256()
    if isinstance(obj, ShardSet):
        import json

        h.update(json.dumps(obj.index, sort_keys=True).encode())
        for doc in obj.iter_documents():
            h.update(doc.tobytes() + b"|")
        return h.hexdigest()
    tok = obj
    h.update(type(tok).__name__.encode())
    h.update(repr(sorted(tok.special_tokens.items())).encode())
    h.update(str(tok.vocab_size).encode())
    used = getattr(tok, "current_vocab_size", tok.vocab_size)  # (the growing vocabulary's ids in use)
    h.update(str(used).encode())
    for i in range(used):
        try:
            h.update(tok.id_to_bytes(i) + b"\0")
        except TokenforgeError:
            h.update(b"-\0")
    probe = _PROBE if not isinstance(tok, tf.Mixedgram) else _PROBE.encode("latin-1", "replace").decode("latin-1")
    h.update(repr(tok.encode(probe)).encode())
    files = tok.fingerprint_files()
    if files is not None:
        for name, data in sorted(files.items()):
            h.update(name.encode() + hashlib.sha256(data).digest())
    else:
        h.update(repr(getattr(tok, "training", None)).encode())
        h.update(repr(getattr(tok, "_settings_for_save", lambda: None)()).encode())
    return h.hexdigest()


# ---------------------------------------------------------------- the cases
def _load_shards(p: Path):
    from tokenforge.data.shards import ShardSet

    s = ShardSet(p)
    s.verify()
    for _ in s.iter_documents():
        pass
    return s


def _tf_load(name: str):
    return lambda p: tf.load(p / name)


def _from_tsv(fmt: str):
    return lambda p: tf.LZ78Tokenizer.from_tsv(p / "dict.tsv", tsv_format=fmt)


#: name -> (our own format?, files fuzzing mutates, loader of the case's directory)
SPECS: dict[str, tuple[bool, list[str], Callable[[Path], object]]] = {
    "bpe-json": (True, ["tok.json"], _tf_load("tok.json")),
    # (a .tiktoken file does not say its pattern: an unknown one is loaded with the caller's)
    "tiktoken": (False, ["ranks.tiktoken"], lambda p: tf.BPETokenizer.from_tiktoken(p / "ranks.tiktoken", "gpt4")),
    "hf-json": (False, ["tokenizer.json"], _tf_load("tokenizer.json")),
    "seed003": (False, ["bpe_vocab.pkl", "bpe_merges.pkl", "special_tokens.txt"], lambda p: tf.load(p)),
    "lz78-tsv": (True, ["lz78.tsv"], _tf_load("lz78.tsv")),
    "lz78-compressed-tsv": (True, ["lz78.tsv"], _tf_load("lz78.tsv")),
    "lz78-seed-tsv": (False, ["dict.tsv"], _from_tsv("lz78")),
    "lz78-seed-compressed-tsv": (False, ["dict.tsv"], _from_tsv("compressed")),
    "mxgram": (False, ["vocab.mxgram"], _tf_load("vocab.mxgram")),
    "mixedgram-json": (True, ["mixedgram.json"], _tf_load("mixedgram.json")),
    "growing-json": (True, ["tokenizer.json"], _tf_load("tokenizer.json")),
    "growing-seed-json": (False, ["tokenizer.json"], _tf_load("tokenizer.json")),
    "shard-index": (True, ["index.json"], _load_shards),
    "spm-model": (False, ["m.model"], _tf_load("m.model")),
    "hf-unigram-json": (False, ["tokenizer.json"], _tf_load("tokenizer.json")),
    "hf-wordpiece-json": (False, ["tokenizer.json"], _tf_load("tokenizer.json")),
    # a converted SentencePiece model: a Precompiled normalizer's charsmap (small custom rules)
    "hf-precompiled-json": (False, ["tokenizer.json"], _tf_load("tokenizer.json")),
    "pipeline-json": (True, ["tok.json"], _tf_load("tok.json")),
    # the shard files the index seals: token arrays and document tables, headers included (issue 32 item 6)
    "shard-files": (True, ["shard_00000.npy", "shard_00000.docs.npy", "shard_00001.docs.npy"], _load_shards),
}


def write_examples(scratch: Path) -> None:
    """Write one small valid example of every format in SPECS, each in ``scratch/<name>/``."""
    from tokenforge.data.shards import pretokenize
    from tokenforge.formats.seed003 import write_seed003

    scratch = Path(scratch)
    for name in SPECS:
        (scratch / name).mkdir(parents=True, exist_ok=True)
    fixtures = Path(__file__).parent / "fixtures"
    bpe = tf.BPETokenizer.train_from_iterator(_TEXTS, vocab_size=300, special_tokens=["<|endoftext|>", "<|bos|>"])
    bpe.save(scratch / "bpe-json" / "tok.json")
    bpe.save_tiktoken(scratch / "tiktoken" / "ranks.tiktoken")
    bpe.save_hf(scratch / "hf-json" / "tokenizer.json")
    seed = tf.BPETokenizer.train_from_iterator(_TEXTS, vocab_size=300, special_tokens=["<|endoftext|>"], pattern="gpt2")
    write_seed003(scratch / "seed003", seed._data)
    lz = tf.LZ78Tokenizer.train_from_iterator(_TEXTS, strategy="standard", vocab_size=400)
    lz.save(scratch / "lz78-tsv" / "lz78.tsv")
    lz.save_tsv(scratch / "lz78-compressed-tsv" / "lz78.tsv", tsv_format="compressed")
    shutil.copy(fixtures / "lz78_seed_example.tsv", scratch / "lz78-seed-tsv" / "dict.tsv")
    shutil.copy(fixtures / "lz78_seed_example_compressed.tsv", scratch / "lz78-seed-compressed-tsv" / "dict.tsv")
    latin = "".join(t for t in _TEXTS if max(t) < "\u0100") * 4
    tf.Mixedgram.train(text=latin, special_tokens=[]).save(scratch / "mxgram" / "vocab.mxgram")
    tf.Mixedgram.train(text=latin).save(scratch / "mixedgram-json" / "mixedgram.json")
    g = tf.GrowingBPETokenizer()
    g.learn_merges(iter(_TEXTS * 3), num_merges=30, min_frequency=2)
    g.save(scratch / "growing-json" / "tokenizer.json")
    shutil.copy(fixtures / "growing_seed_tokenizer.json", scratch / "growing-seed-json" / "tokenizer.json")
    pretokenize(iter(_TEXTS * 5), bpe, scratch / "shard-index", shard_tokens=200, progress=False, num_threads=1)
    shutil.rmtree(scratch / "shard-files")
    shutil.copytree(scratch / "shard-index", scratch / "shard-files")
    _write_imported(scratch)


def _write_imported(scratch: Path) -> None:
    """The imported formats: a SentencePiece model (byte fallback, NFKC charsmap) and
    tokenizer.json files of a Unigram and a WordPiece model, trained by their own libraries."""
    import io

    import sentencepiece as spm
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(_TEXTS * 3),
        model_writer=out,
        vocab_size=400,
        byte_fallback=True,
        user_defined_symbols=["@@"],
        hard_vocab_limit=False,
        minloglevel=2,
    )
    (scratch / "spm-model" / "m.model").write_bytes(out.getvalue())
    uni = Tokenizer(models.Unigram())
    uni.normalizer = normalizers.NFKC()
    uni.pre_tokenizer = pre_tokenizers.Metaspace()
    uni.decoder = decoders.Metaspace()
    uni.train_from_iterator(
        _TEXTS * 3, trainers.UnigramTrainer(vocab_size=150, special_tokens=["<unk>"], unk_token="<unk>")
    )
    uni.save(str(scratch / "hf-unigram-json" / "tokenizer.json"))
    wp = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wp.normalizer = normalizers.BertNormalizer()
    wp.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    wp.decoder = decoders.WordPiece()
    wp.train_from_iterator(_TEXTS * 3, trainers.WordPieceTrainer(vocab_size=200, special_tokens=["[UNK]", "[CLS]"]))
    wp.save(str(scratch / "hf-wordpiece-json" / "tokenizer.json"))
    tf.load(scratch / "spm-model" / "m.model").save(scratch / "pipeline-json" / "tok.json")
    _write_precompiled(scratch / "hf-precompiled-json" / "tokenizer.json")


def _write_precompiled(path: Path) -> None:
    """A Unigram tokenizer.json whose normalizer is a Precompiled charsmap of a few
    rules (a sentencepiece normalization_rule_tsv: a few hundred bytes of trie)."""
    import io
    import tempfile

    import sentencepiece as spm

    from spm_convert import converted_tokenizer

    rules = {"41": "61", "41 301": "E1", "FB01": "66 69", "3000": "20", "9": "20", "2460": "31", "7F": ""}
    with tempfile.TemporaryDirectory() as d:
        tsv = Path(d) / "rules.tsv"
        tsv.write_text("".join(f"{k}\t{v}\n" for k, v in rules.items()))
        out = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(_TEXTS * 3),
            model_writer=out,
            vocab_size=150,
            hard_vocab_limit=False,
            normalization_rule_tsv=str(tsv),
            minloglevel=2,
        )
    converted_tokenizer(out.getvalue(), t5=False).save(str(path))


def read_cases(scratch: Path) -> list[Case]:
    """The cases :func:`write_examples` wrote, each with the digest of what it loads as."""
    cases = []
    for name, (own, targets, load) in SPECS.items():
        d = Path(scratch) / name
        files = {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}
        case = Case(name, own, files, targets, load)
        case.reference = digest(load(d))
        cases.append(case)
    return cases


def build_cases(scratch: Path) -> list[Case]:
    """:func:`write_examples` then :func:`read_cases`."""
    write_examples(scratch)
    return read_cases(scratch)


def case_by_name(cases: list[Case], name: str) -> Case:
    return next(c for c in cases if c.name == name)


# ---------------------------------------------------------------- mutations
_HUGE = [
    b"4294967296",
    b"4294967295",
    b"18446744073709551616",
    b"-1",
    b"1e999",
    b"NaN",
    b"-0",
    b"9" * 5000,
    b"99999999999999999999999999999",
    b"2147483648",
    b"65536",
    b"0x10",
]
_JUNK = [
    b"\x00",
    b"\xff",
    b"\xc3",
    b"\xed\xa0\xbd",
    b"\\ud83d",
    b"\\udc00",
    b'"',
    b"\\",
    b"\n",
    b"\r",
    b"\t",
    b"#",
    b",",
    b"[",
    b"]",
    b"{",
    b"}",
    b":",
    b"null",
    b"true",
    b"\x80",
    b"\x94",
    b"h\x00",
    b"r\x00\x00\x00\x04",
]


def _flip(r: random.Random, b: bytearray) -> None:
    if b:
        i = r.randrange(len(b))
        b[i] ^= 1 << r.randrange(8)


def _set_byte(r, b):
    if b:
        b[r.randrange(len(b))] = r.randrange(256)


def _insert(r, b):
    i = r.randrange(len(b) + 1)
    b[i:i] = r.choice(_JUNK) if r.random() < 0.7 else bytes(r.randrange(256) for _ in range(r.randrange(1, 9)))


def _delete(r, b):
    if b:
        i = r.randrange(len(b))
        del b[i : i + r.randrange(1, 33)]


def _truncate(r, b):
    if b:
        del b[r.randrange(len(b)) :]


def _digits(r, b):
    idx = [i for i in range(len(b)) if 48 <= b[i] <= 57]
    if idx:
        for i in r.sample(idx, min(len(idx), r.randrange(1, 3))):
            b[i] = r.randrange(48, 58)


def _huge_number(r, b):
    idx = [i for i in range(len(b)) if 48 <= b[i] <= 57]
    if not idx:
        return _insert(r, b)
    i = r.choice(idx)
    j = i
    while j < len(b) and 48 <= b[j] <= 57:
        j += 1
    while i > 0 and 48 <= b[i - 1] <= 57:
        i -= 1
    b[i:j] = r.choice(_HUGE)


def _duplicate(r, b):
    if b:
        i = r.randrange(len(b))
        chunk = b[i : i + r.randrange(1, 200)]
        j = r.randrange(len(b) + 1)
        b[j:j] = chunk * r.randrange(1, 4)


def _deep(r, b):
    n = r.choice([70, 1000, 100000])
    i = r.randrange(len(b) + 1)
    opener, closer = r.choice([(b"[", b"]"), (b'{"a":', b"}")])
    b[i:i] = opener * n + (closer * n if r.random() < 0.5 else b"")


def _swap_lines(r, b):
    lines = bytes(b).split(b"\n")
    if len(lines) > 2:
        i, j = r.randrange(len(lines)), r.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
        b[:] = b"\n".join(lines)


def _strip_comments(r, b):
    """``grep -v '^#'``: every comment line gone (our TSV headers and checksums with them)."""
    b[:] = b"".join(line for line in bytes(b).splitlines(keepends=True) if not line.startswith(b"#"))


def _cut_lines(r, b):
    """The file cut after a whole line (its header, its column-name row, some rows)."""
    lines = bytes(b).splitlines(keepends=True)
    if lines:
        b[:] = b"".join(lines[: r.randrange(len(lines))])


MUTATIONS = {
    f.__name__.lstrip("_"): f
    for f in (
        _flip,
        _set_byte,
        _insert,
        _delete,
        _truncate,
        _digits,
        _huge_number,
        _duplicate,
        _deep,
        _swap_lines,
        _strip_comments,
        _cut_lines,
    )
}
_WEIGHTS = {
    "flip": 3,
    "set_byte": 2,
    "insert": 3,
    "delete": 2,
    "truncate": 1,
    "digits": 4,
    "huge_number": 3,
    "duplicate": 2,
    "deep": 1,
    "swap_lines": 1,
    "strip_comments": 1,
    "cut_lines": 1,
}


def mutate(case: Case, r: random.Random) -> tuple[str, bytes, list[str]]:
    """(target file, its mutated bytes, the names of the mutations applied)."""
    target = r.choice(case.targets)
    b = bytearray(case.files[target])
    names = r.choices(list(_WEIGHTS), weights=list(_WEIGHTS.values()), k=r.choice([1, 1, 1, 2, 3]))
    for n in names:
        MUTATIONS[n](r, b)
    return target, bytes(b), names


def try_load(case: Case, directory: Path) -> tuple[str, str]:
    """(outcome, detail) of loading the case's files in ``directory`` (see the module doc)."""
    try:
        obj = case.load(directory)
        d = digest(obj)
    except TokenforgeError as e:
        return "error", f"{type(e).__name__}: {str(e)[:300]}"
    except FileNotFoundError as e:  # a mutation cannot remove a file; this is a reader's bug
        return "outside", f"FileNotFoundError: {str(e)[:300]}"
    except Exception as e:  # noqa: BLE001 -- exactly what the fuzzer looks for
        import traceback

        tb = traceback.extract_tb(e.__traceback__)[-1]
        return "outside", f"{type(e).__name__}: {str(e)[:300]} ({Path(tb.filename).name}:{tb.lineno})"
    return ("equal", "") if d == case.reference else ("different", "")


# ---------------------------------------------------------------- a bounded in-process run
class _Hang(BaseException):
    """Raised by the alarm in :func:`run_trials` (a BaseException, so that no
    reader's ``except Exception`` swallows it)."""


def run_trials(examples: Path, scratch: Path, seed: int, per_format: int, timeout: float = 10.0) -> dict:
    """Fuzz every format ``per_format`` times in this process; returns counts by
    (format, outcome) and the findings. Each load runs under an alarm of
    ``timeout`` seconds (a Python-level hang becomes the outcome "hang"), and
    faulthandler ends the process after ``3 * timeout`` if a load is stuck
    where the alarm cannot reach (the caller sees the exit and the traceback).
    Before each load the trial is written to stderr, so whoever ran this
    process knows which trial an abort happened in."""
    import faulthandler
    import signal
    import sys

    cases = read_cases(examples)

    def alarm(signum, frame):
        raise _Hang()

    old = signal.signal(signal.SIGALRM, alarm)
    counts: dict[str, int] = {}
    findings: list[dict] = []
    try:
        for k in range(per_format * len(cases)):
            case = cases[k % len(cases)]
            target, data, muts = mutate(case, random.Random(f"{seed}:{k}"))
            d = case.write(Path(scratch) / case.name)
            (d / target).write_bytes(data)
            print(f"trial {k}: {case.name} {target} {muts}", file=sys.stderr, flush=True)
            faulthandler.dump_traceback_later(3 * timeout, exit=True)
            signal.setitimer(signal.ITIMER_REAL, timeout)
            try:
                outcome, detail = try_load(case, d)
            except _Hang:
                outcome, detail = "hang", f"no answer in {timeout} s"
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                faulthandler.cancel_dump_traceback_later()
                (d / target).write_bytes(case.files[target])
            key = f"{case.name}/{outcome}"
            counts[key] = counts.get(key, 0) + 1
            if outcome in ("outside", "hang") or (outcome == "different" and case.own):
                findings.append(
                    {
                        "trial": k,
                        "case": case.name,
                        "own": case.own,
                        "outcome": outcome,
                        "target": target,
                        "mutations": muts,
                        "detail": detail,
                    }
                )
    finally:
        signal.signal(signal.SIGALRM, old)
    return {"counts": counts, "findings": findings}


if __name__ == "__main__":  # python tests/fuzz_formats.py EXAMPLES SCRATCH SEED PER_FORMAT: JSON on stdout
    import json
    import sys

    _examples, _scratch, _seed, _n = sys.argv[1:5]
    print(json.dumps(run_trials(Path(_examples), Path(_scratch), int(_seed), int(_n))))
