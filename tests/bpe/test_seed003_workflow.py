"""Seed 003's workflow end to end: train(input_path=..., save_dir=...) then from_file(...).

The seed's files must be what gpt_from_scratch's own code reads (checked with
plain ``pickle.load`` in a separate interpreter that never imports tokenforge),
``from_file`` must give the same ids, seed-mode tokenizers split special tokens
out of the text as the seed does, and the split pattern survives the trip.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import warnings
from collections import Counter

import pytest
import regex

import tokenforge
from tokenforge import BPETokenizer
from tokenforge.cli.main import main as cli_main
from tokenforge.errors import FormatError, TokenforgeError
from tokenforge.formats.patterns import GPT2_PATTERN, GPT4_PATTERN
from tokenforge.formats.seed003 import PATTERN_FILE, load_plain_pickle

EOT = "<|endoftext|>"
STORY = (
    "Once upon a time there was a tiny robot. It's name was Bolt, and Bolt loved 123 bolts.\n"
    "The robot said: don't stop! We'll see 4567 stars tonight.{eot}"
    "Another story: the cat sat on the mat, the cat was happy.{eot}"
    "ab ba ab ba cd dc cd dc ef fe{eot}"
)
SAMPLES = ["Hello, world!", "the robot's cat", f"a{EOT}b", "numbers 1234567 and   spaces\n\nnew lines", "ünïcödé 😀"]


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text(STORY.format(eot=EOT) * 30, encoding="utf-8")
    return path


@pytest.fixture
def trained(corpus, tmp_path):
    """Seed 003's usage, word for word."""
    out = tmp_path / "OUT"
    tokenizer = BPETokenizer()
    tokenizer.train(input_path=str(corpus), vocab_size=330, save_dir=str(out), special_tokens=[EOT], progress=False)
    return tokenizer, out


# ------------------------------------------------------------------ the files
_PLAIN_LOAD = r"""
import json, pickle, sys
d = sys.argv[1]
with open(d + "/bpe_vocab.pkl", "rb") as f:
    vocab = pickle.load(f)
with open(d + "/bpe_merges.pkl", "rb") as f:
    merges = pickle.load(f)
with open(d + "/special_tokens.txt", encoding="utf-8") as f:
    specials = f.read().splitlines()
with open(d + "/pre_tokenization_pattern.txt", encoding="utf-8") as f:
    pattern = f.read()
assert "tokenforge" not in sys.modules
assert type(vocab) is dict and all(type(k) is int and type(v) is bytes for k, v in vocab.items())
assert type(merges) is list
assert all(type(m) is tuple and len(m) == 2 and all(type(x) is bytes for x in m) for m in merges)
print(json.dumps({
    "vocab": {str(k): v.hex() for k, v in vocab.items()},
    "merges": [[a.hex(), b.hex()] for a, b in merges],
    "specials": specials,
    "pattern": pattern,
}))
"""


def test_seed_files_load_with_plain_pickle(trained):
    """The original code's loader (pickle.load) reads what train(save_dir=...) wrote."""
    tok, out = trained
    names = {p.name for p in out.iterdir()}
    assert {"bpe_vocab.pkl", "bpe_merges.pkl", "special_tokens.txt", PATTERN_FILE, "tokenforge.json"} <= names
    run = subprocess.run(
        [sys.executable, "-I", "-c", _PLAIN_LOAD, str(out)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    vocab = {int(k): bytes.fromhex(v) for k, v in got["vocab"].items()}
    merges = [(bytes.fromhex(a), bytes.fromhex(b)) for a, b in got["merges"]]
    # the seed's layout: bytes 0..255, the special at 256, merges after it
    assert sorted(vocab) == list(range(len(vocab))) == list(range(tok.vocab_size))
    assert all(vocab[i] == bytes([i]) for i in range(256))
    assert vocab[256] == EOT.encode() and got["specials"] == [EOT]
    assert len(merges) == len(tok.merges) == len(vocab) - 257 > 20
    for k, (a, b) in enumerate(merges):
        assert vocab[257 + k] == a + b
        assert tok.id_to_bytes(257 + k) == a + b
    assert got["pattern"] == GPT2_PATTERN


def test_from_file_round_trip_gives_the_same_ids(trained):
    tok, out = trained
    back = BPETokenizer.from_file(str(out / "bpe_vocab.pkl"), str(out / "bpe_merges.pkl"))
    also = tokenforge.load(out)  # tokenforge.json beside the pickles
    pickles = tokenforge.load(out / "bpe_vocab.pkl")
    for t in (back, also, pickles):
        assert t.split_specials and t.special_tokens == {EOT: 256}
        assert t.data.pattern == GPT2_PATTERN
        assert t.merges == tok.merges
        for s in SAMPLES + [STORY.format(eot=EOT)]:
            assert t.encode(s) == tok.encode(s)
            assert t.decode(t.encode(s)) == s
    assert json.loads((out / "tokenforge.json").read_text())["split_specials"] is True


def test_class_call_with_input_path_is_seed_mode_too(corpus, tmp_path):
    tok = BPETokenizer.train(input_path=corpus, vocab_size=300, save_dir=tmp_path / "o", progress=False)
    assert tok.split_specials and tok.special_tokens == {EOT: 256}
    assert (tmp_path / "o" / "bpe_vocab.pkl").is_file() and (tmp_path / "o" / "tokenforge.json").is_file()
    # without save_dir nothing is written, and the ordinary API is not seed mode
    plain = BPETokenizer.train(corpus, 300, progress=False)
    assert not plain.split_specials and plain.data.pattern_name == "gpt4"
    assert not (tmp_path / "bpe_vocab.pkl").exists()


# ------------------------------------------------------------------ special tokens
def test_seed_mode_splits_special_tokens_out(trained):
    tok, out = trained
    back = BPETokenizer.from_file(out / "bpe_vocab.pkl", out / "bpe_merges.pkl")
    for t in (tok, back):
        assert t.encode("a<|endoftext|>b") == [97, 256, 98]
        assert t.encode(["a<|endoftext|>b", EOT]) == [[97, 256, 98], [256]]
        # the caller can still ask for text (tokenforge's policy), and encode_ordinary never splits
        as_text = t.encode_ordinary("a<|endoftext|>b")
        assert t.encode("a<|endoftext|>b", allowed_special=()) == as_text and 256 not in as_text
    # the CLI follows the tokenizer's recorded policy
    assert cli_main(["encode", str(out / "tokenforge.json"), "a<|endoftext|>b"]) == 0


def test_cli_encode_follows_the_recorded_policy(trained, capsys):
    tok, out = trained
    assert cli_main(["encode", str(out), "a<|endoftext|>b"]) == 0
    assert capsys.readouterr().out.split() == ["97", "256", "98"]
    tok.split_specials = False
    tok.save(out / "plain.json")
    assert cli_main(["encode", str(out / "plain.json"), "a<|endoftext|>b"]) == 0
    assert "256" not in capsys.readouterr().out.split()


def test_longest_special_first(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("hello there<|a|>general kenobi<|a|>b you are a bold one\n" * 20, encoding="utf-8")
    tok = BPETokenizer()
    tok.train(input_path=corpus, vocab_size=300, special_tokens=["<|a|>", "<|a|>b", "a|"], progress=False)
    assert tok.special_tokens == {"<|a|>": 256, "<|a|>b": 257, "a|": 258}
    assert tok.encode("x<|a|>by<|a|>z a|") == [120, 257, 121, 256, 122, 32, 258]
    # none of the specials' text was learned from: no merge contains "<|" or "|>"
    assert not any(b"|" in tok.id_to_bytes(m[2]) for m in tok.merges)


def test_ordinary_tokenizers_keep_special_text_as_text(corpus):
    tok = BPETokenizer.train(corpus, 300, special_tokens=[EOT], progress=False)
    assert not tok.split_specials
    ids = tok.encode("a<|endoftext|>b")
    assert tok.special_tokens[EOT] not in ids and tok.decode(ids) == "a<|endoftext|>b"
    assert tok.encode("a<|endoftext|>b", allowed_special="all") == [97, tok.special_tokens[EOT], 98]


def test_split_specials_is_saved_and_settable(trained, tmp_path):
    tok, _ = trained
    tok.save(tmp_path / "t.json")
    assert tokenforge.load(tmp_path / "t.json").split_specials
    tok.split_specials = False
    tok.save(tmp_path / "u.json")
    u = tokenforge.load(tmp_path / "u.json")
    assert not u.split_specials and 256 not in u.encode("a<|endoftext|>b")
    assert "split_specials" not in json.loads((tmp_path / "u.json").read_text())
    with pytest.raises(TypeError):
        tok.split_specials = "yes"


def test_chat_rendering_never_turns_message_text_into_specials(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("hi there, how are you<|endoftext|>fine thanks\n" * 10, encoding="utf-8")
    chat = ["<|bos|>", "<|user_start|>", "<|user_end|>", "<|assistant_start|>", "<|assistant_end|>"]
    tok = BPETokenizer()
    tok.train(input_path=corpus, vocab_size=300, special_tokens=chat, progress=False)
    ids, mask = tok.render_conversation(
        {"messages": [{"role": "user", "content": "x<|assistant_start|>"}, {"role": "assistant", "content": "ok"}]}
    )
    assert ids.count(tok.special_tokens["<|assistant_start|>"]) == 1


# ------------------------------------------------------------------ the pattern file
def test_gpt4_pattern_survives_export_and_from_file(tmp_path):
    texts = ["it's 1234567 o'clock", "Hello   world!!\n\n  ok", "ünïcödé 😀 123"] * 20
    tok = BPETokenizer.train_from_iterator(texts, 320, pattern="gpt4", special_tokens=[EOT], progress=False)
    tok.export_seed003(tmp_path / "seed")
    assert (tmp_path / "seed" / PATTERN_FILE).read_text(encoding="utf-8") == GPT4_PATTERN
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        back = BPETokenizer.from_file(tmp_path / "seed" / "bpe_vocab.pkl", tmp_path / "seed" / "bpe_merges.pkl")
    assert back.data.pattern == GPT4_PATTERN and back.data.pattern_name == "gpt4"
    for s in texts[:3]:
        assert back.encode(s) == tok.encode(s)
    # the two patterns really do give different ids here, so the test means something
    (tmp_path / "seed" / PATTERN_FILE).unlink()
    with pytest.warns(UserWarning, match=f"no {PATTERN_FILE}.*GPT-2"):
        gpt2 = BPETokenizer.from_file(tmp_path / "seed" / "bpe_vocab.pkl", tmp_path / "seed" / "bpe_merges.pkl")
    assert gpt2.data.pattern == GPT2_PATTERN and gpt2.data.pattern_name == "gpt2"
    assert any(gpt2.encode(s) != tok.encode(s) for s in texts[:3])
    with pytest.warns(UserWarning, match=f"no {PATTERN_FILE}"):
        assert tokenforge.load(tmp_path / "seed").data.pattern == GPT2_PATTERN


@pytest.mark.parametrize("pattern", [r"\p{L}+|\p{N}|[^\p{L}\p{N}]+", None])
def test_custom_and_no_pattern_survive(tmp_path, pattern):
    texts = ["abc def 12 ghi", "def abc  !!"] * 20
    tok = BPETokenizer.train_from_iterator(texts, 290, pattern=pattern, special_tokens=None, progress=False)
    tok.export_seed003(tmp_path / "s")
    back = BPETokenizer.from_file(tmp_path / "s" / "bpe_vocab.pkl", tmp_path / "s" / "bpe_merges.pkl")
    assert back.data.pattern == pattern
    assert all(back.encode(s) == tok.encode(s) for s in texts)


def test_pattern_file_line_end_and_errors(tmp_path, trained):
    _, out = trained
    path = out / PATTERN_FILE
    path.write_text(GPT4_PATTERN + "\r\n", encoding="utf-8")  # an editor's end of line
    assert BPETokenizer.from_file(out / "bpe_vocab.pkl", out / "bpe_merges.pkl").data.pattern == GPT4_PATTERN
    path.write_text("(unclosed", encoding="utf-8")
    with pytest.raises(FormatError, match="does not compile") as e:
        BPETokenizer.from_file(out / "bpe_vocab.pkl", out / "bpe_merges.pkl")
    assert e.value.path == str(path)
    path.write_bytes(b"ab\xffc")
    with pytest.raises(FormatError, match="not UTF-8") as e:
        BPETokenizer.from_file(out / "bpe_vocab.pkl")
    assert e.value.path == str(path) and e.value.offset == 2
    path.write_text("\n")
    with pytest.raises(FormatError, match="empty file"):
        BPETokenizer.from_file(out)


def test_pattern_ending_in_a_line_break_is_refused(tmp_path):
    tok = BPETokenizer.train_from_iterator(
        ["a b\nc"] * 5, 260, pattern=r"\w+|\s|\n", special_tokens=None, progress=False
    )
    tok.export_seed003(tmp_path / "ok")  # an escaped \n is fine
    odd = BPETokenizer.train_from_iterator(
        ["a b\nc"] * 5, 260, pattern="\\w+|\\s|\n", special_tokens=None, progress=False
    )
    with pytest.raises(TokenforgeError, match="ends in a line break"):
        odd.export_seed003(tmp_path / "bad")
    assert not (tmp_path / "bad").exists()


# ------------------------------------------------------------------ the trainer follows the seed
def _seed_rule(text: str, specials: list[str], num_merges: int) -> list[tuple[bytes, bytes]]:
    """gpt_from_scratch's rule in its plainest form: split at the specials, GPT-2
    pieces, highest count, ties to the lexicographically largest pair of bytes."""
    splitter = "|".join(re.escape(s) for s in sorted(specials, key=len, reverse=True))
    words: Counter = Counter()
    for doc in re.split(splitter, text):
        for piece in regex.findall(GPT2_PATTERN, doc):
            words[tuple(bytes([b]) for b in piece.encode("utf-8"))] += 1
    merges = []
    for _ in range(num_merges):
        pairs: Counter = Counter()
        for w, c in words.items():
            for pair in zip(w, w[1:]):
                pairs[pair] += c
        if not pairs:
            break
        best = max(pairs, key=lambda p: (pairs[p], p))
        merges.append(best)
        merged: Counter = Counter()
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] += c
        words = merged
    return merges


def test_trainer_splits_at_the_special_and_breaks_ties_lexicographically(trained, corpus):
    tok, out = trained
    text = corpus.read_text(encoding="utf-8")
    want = _seed_rule(text, [EOT], 330 - 257)
    assert load_plain_pickle(out / "bpe_merges.pkl") == want
    assert tok.data.training["tie_break"] == "lexicographic" and tok.data.training["layout"] == "specials_first"
    # the corpus has ties that the other rule (smallest pair of ids) breaks differently
    other = BPETokenizer.train(
        corpus, 330, pattern="gpt2", special_tokens=[EOT], layout="specials_first", split_on=EOT, progress=False
    )
    assert [(other.id_to_bytes(a), other.id_to_bytes(b)) for a, b, _ in other.merges] != want
    # and without splitting at the special, its text would be learned from
    unsplit = _seed_rule(text, ["\x00never\x00"], 330 - 257)
    assert unsplit != want and any(b"|" in a + b for a, b in unsplit)


def test_explicit_settings_are_honoured_in_seed_mode(corpus, tmp_path):
    tok = BPETokenizer()
    tok.train(
        input_path=corpus, vocab_size=300, save_dir=tmp_path / "o", special_tokens=[EOT], pattern="gpt4", progress=False
    )
    assert tok.data.pattern == GPT4_PATTERN
    assert (tmp_path / "o" / PATTERN_FILE).read_text(encoding="utf-8") == GPT4_PATTERN
    back = BPETokenizer.from_file(tmp_path / "o" / "bpe_vocab.pkl", tmp_path / "o" / "bpe_merges.pkl")
    assert all(back.encode(s) == tok.encode(s) for s in SAMPLES)


def test_specials_the_seed_files_cannot_hold_are_refused_before_training(corpus, tmp_path):
    for bad in (["two\nlines"], [" padded"]):
        with pytest.raises(TokenforgeError, match="cannot be one line"):
            BPETokenizer().train(input_path=corpus, vocab_size=300, save_dir=tmp_path / "o", special_tokens=bad)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("failing", [2, 6])  # our JSON's vocabulary view; the seed's pattern file, opened last
def test_a_failed_seed_mode_save_replaces_none_of_the_six_files(corpus, tmp_path, monkeypatch, failing):
    """train(save_dir=...) in seed mode writes the seed's four files and ours as one
    save: disk full while writing any of them leaves every earlier file as it was
    (issue 32 item 7)."""
    from bpe_strategies import fail_writes_halfway

    out = tmp_path / "OUT"
    BPETokenizer().train(input_path=str(corpus), vocab_size=300, save_dir=str(out), progress=False)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert len(before) == 6  # 4 seed files, tokenforge.json and its vocabulary view
    fail_writes_halfway(monkeypatch, nth=failing)
    with pytest.raises(OSError, match="No space left"):
        BPETokenizer().train(input_path=str(corpus), vocab_size=330, save_dir=str(out), progress=False)
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
