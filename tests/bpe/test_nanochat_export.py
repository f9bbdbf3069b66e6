"""nanochat's tokenizer directory: save_nanochat, read back through the restricted reader.

nanochat is not on the package index, so its two loading steps are reproduced
here as it runs them: ``pickle.load`` of ``tokenizer.pkl`` (a real
``tiktoken.Encoding``) and ``torch.load`` of ``token_bytes.pt``; the chat
rendering is rebuilt on the loaded encoding with nanochat's rules (written for
this test from its documented behaviour) and compared with ours.
"""

from __future__ import annotations

import copyreg
import io
import pickle
import pickletools
import sys
import warnings

import pytest
import tiktoken  # in the dev extra: a missing peer is an error, not a skip

import tokenforge
from export_cases import CONVERSATIONS, HELD_OUT, TRAIN
from tokenforge import BPETokenizer
from tokenforge.errors import FormatError, TokenforgeError, UnsafePickleError


@pytest.fixture(scope="module")
def tok():
    return BPETokenizer.train_from_iterator(TRAIN, 1500)


@pytest.fixture(scope="module")
def exported(tok, tmp_path_factory):
    d = tmp_path_factory.mktemp("nanochat")
    tok.save_nanochat(d)
    return d


def nanochat_load(d):
    """nanochat's two loading steps: RustBPETokenizer.from_directory and get_token_bytes."""
    import torch

    with open(d / "tokenizer.pkl", "rb") as f:
        enc = pickle.load(f)
    with open(d / "token_bytes.pt", "rb") as f:
        token_bytes = torch.load(f, map_location="cpu")
    return enc, token_bytes


def render_like_nanochat(enc, conversation):
    """nanochat's render_conversation rules on a tiktoken encoding (our own code)."""
    sp = enc.encode_single_token
    messages = conversation["messages"]
    if messages[0]["role"] == "system":
        messages = [dict(messages[1], content=messages[0]["content"] + "\n\n" + messages[1]["content"])] + messages[2:]
    ids, mask = [sp("<|bos|>")], [0]

    def add(xs, m):
        ids.extend(xs)
        mask.extend([m] * len(xs))

    for m in messages:
        if m["role"] == "user":
            add([sp("<|user_start|>")] + enc.encode_ordinary(m["content"]) + [sp("<|user_end|>")], 0)
            continue
        add([sp("<|assistant_start|>")], 0)
        parts = m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
        for part in parts:
            body = enc.encode_ordinary(part["text"])
            if part["type"] == "text":
                add(body, 1)
            elif part["type"] == "python":
                add([sp("<|python_start|>")] + body + [sp("<|python_end|>")], 1)
            else:
                add([sp("<|output_start|>")] + body + [sp("<|output_end|>")], 0)
        add([sp("<|assistant_end|>")], 1)
    return ids, mask


def test_nanochat_loads_our_directory_with_our_ids_rendering_and_byte_counts(tok, exported):
    enc, token_bytes = nanochat_load(exported)
    assert isinstance(enc, tiktoken.Encoding)
    assert enc.n_vocab == tok.vocab_size
    for text in HELD_OUT:
        assert enc.encode_ordinary(text) == tok.encode(text)
    assert enc.encode_ordinary_batch(HELD_OUT, num_threads=2) == tok.encode(HELD_OUT)
    assert enc.decode(tok.encode(HELD_OUT[0])) == HELD_OUT[0]
    # get_token_bytes(): int32, each id's raw byte length, 0 for specials (nanochat's tok_train rule)
    import torch

    assert token_bytes.dtype == torch.int32 and token_bytes.shape == (tok.vocab_size,)
    specials = set(enc.special_tokens_set)
    special_ids = {enc.encode_single_token(s) for s in specials}
    want = [0 if i in special_ids else len(enc.decode_single_token_bytes(i)) for i in range(enc.n_vocab)]
    assert token_bytes.tolist() == want == tok.token_bytes().tolist()
    # the chat rendering through the loaded encoding and the same specials
    assert specials == set(tok.special_tokens)
    for messages in CONVERSATIONS:
        conv = {"messages": messages}
        assert render_like_nanochat(enc, conv) == tok.render_conversation(conv)


def test_the_pickle_is_what_pickle_dump_of_the_encoding_writes(tok, exported):
    enc = tiktoken.Encoding(
        name="tokenforge",
        pat_str=tok.pattern,
        mergeable_ranks=tok.mergeable_ranks(),
        special_tokens=tok.special_tokens,
    )
    assert (exported / "tokenizer.pkl").read_bytes() == pickle.dumps(enc)


def test_load_reads_the_directory_and_the_pickle_back(tok, exported):
    for path in (exported, exported / "tokenizer.pkl"):
        back = tokenforge.load(path)
        assert isinstance(back, BPETokenizer)
        assert back.pattern == tok.pattern and back.special_tokens == tok.special_tokens
        assert back.merges == tok.merges
        assert [back.encode(t) for t in HELD_OUT] == [tok.encode(t) for t in HELD_OUT]
    assert tokenforge.registry.identify(exported).name == "nanochat"


def test_a_pickle_nanochat_wrote_with_rustbpe_settings_loads(tmp_path, tok):
    """A pickle made the way nanochat's own trainer makes it, at every protocol with a bytes opcode."""
    enc = tiktoken.Encoding(
        name="rustbpe", pat_str=tok.pattern, mergeable_ranks=tok.mergeable_ranks(), special_tokens=tok.special_tokens
    )
    for protocol in (3, 4, 5):
        p = tmp_path / f"p{protocol}" / "tokenizer.pkl"
        p.parent.mkdir()
        p.write_bytes(pickle.dumps(enc, protocol=protocol))
        back = tokenforge.load(p.parent)
        assert back.encode(HELD_OUT[1]) == tok.encode(HELD_OUT[1])


def test_without_torch_the_pickle_is_written_alone_with_one_warning(tok, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        written = tok.save_nanochat(tmp_path)
    assert [p.name for p in written] == ["tokenizer.pkl"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tokenizer.pkl"]
    msgs = [str(w.message) for w in caught if issubclass(w.category, tokenforge.TokenforgeWarning)]
    assert len(msgs) == 1 and "torch is not installed" in msgs[0] and "\n" not in msgs[0]


def test_without_torch_an_old_token_bytes_file_is_not_left_beside_a_new_pickle(tok, tmp_path, monkeypatch):
    (tmp_path / "token_bytes.pt").write_bytes(b"another vocabulary's byte counts")
    monkeypatch.setitem(sys.modules, "torch", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tok.save_nanochat(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tokenizer.pkl"]
    assert any("removed the old token_bytes.pt" in str(w.message) for w in caught)


def test_a_tokenizer_without_bos_is_refused(tmp_path):
    plain = BPETokenizer.train_from_iterator(TRAIN[:50], 300, special_tokens=["<|endoftext|>"])
    with pytest.raises(TokenforgeError, match="<\\|bos\\|>"):
        plain.save_nanochat(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_cli_train_format_nanochat(tmp_path):
    from tokenforge.cli.main import main

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(TRAIN[:80]), encoding="utf-8")
    out = tmp_path / "nc"
    assert main(["train", str(corpus), "--vocab-size", "600", "-o", str(out), "--format", "nanochat", "-q"]) == 0
    enc, token_bytes = nanochat_load(out)
    assert enc.n_vocab == 600 == len(token_bytes)


# ---------------------------------------------------------------- hostile pickles
class _AsEncoding:
    """Pickles as an Encoding with any state: pickle.dump's own bytes for it."""

    def __init__(self, state):
        self.state = state

    @property
    def __class__(self):  # pickle checks that NEWOBJ's class is the object's
        return tiktoken.Encoding

    def __reduce_ex__(self, protocol):
        return (copyreg.__newobj__, (tiktoken.Encoding,), self.state)


def _state_pickle(state, protocol=4) -> bytes:
    """What pickle.dump writes for an Encoding whose state is ``state``."""
    return pickle.dumps(_AsEncoding(state), protocol=protocol)


def _good_state(tok):
    return {
        "name": "x",
        "pat_str": tok.pattern,
        "mergeable_ranks": tok.mergeable_ranks(),
        "special_tokens": dict(tok.special_tokens),
    }


def test_the_test_builder_makes_a_pickle_tokenforge_and_pickle_read(tok, tmp_path):
    p = tmp_path / "tokenizer.pkl"
    p.write_bytes(_state_pickle(_good_state(tok)))
    assert pickle.loads(p.read_bytes()).encode_ordinary("hi there") == tok.encode("hi there")
    assert tokenforge.load(p).encode("hi there") == tok.encode("hi there")


class _Evil:
    def __reduce__(self):
        import os

        return (os.system, ("echo pwned",))


def _bomb() -> bytes:
    """A state of pairs that share each other 40 levels deep (2**40 items when walked)."""
    out = io.BytesIO()
    out.write(b"\x80\x04\x8c\rtiktoken.core\x94\x8c\x08Encoding\x94\x93\x94)\x81\x94")
    out.write(b"]\x940")  # EMPTY_LIST as memo 4, popped
    for k in range(40):  # (x, x) of the previous level, as memo 5 + k
        out.write(b"h" + bytes([4 + k]) + b"h" + bytes([4 + k]) + b"\x86\x94" + (b"0" if k < 39 else b""))
    out.write(b"b.")
    return out.getvalue()


HOSTILE = {
    "os.system global": b"\x80\x04\x8c\x02os\x94\x8c\x06system\x94\x93\x94)\x81\x94}\x94b.",
    "GLOBAL builtins.eval": b"\x80\x02cbuiltins\neval\nq\x00)\x81q\x01}q\x02b.",
    "reduce in the state": None,  # filled by the test (needs a real pickle)
    "a second class in the state": None,
    "arguments to the constructor": b"\x80\x04\x8c\rtiktoken.core\x94\x8c\x08Encoding\x94\x93\x94N\x85\x94\x81\x94}\x94b.",
    "no BUILD": b"\x80\x04\x8c\rtiktoken.core\x94\x8c\x08Encoding\x94\x93\x94)\x81\x94.",
    "memo bomb": _bomb(),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_pickles_are_refused_without_running_anything(tok, tmp_path, case):
    raw = HOSTILE[case]
    if case == "reduce in the state":
        state = _good_state(tok)
        state["name"] = _Evil()
        raw = _state_pickle(state)
    elif case == "a second class in the state":
        raw = _state_pickle({"name": "x", "pat_str": "a", "mergeable_ranks": {}, "special_tokens": io.BytesIO})
    p = tmp_path / "tokenizer.pkl"
    p.write_bytes(raw)
    with pytest.raises((UnsafePickleError, FormatError)) as e:
        tokenforge.load(p)
    assert isinstance(e.value, UnsafePickleError), e.value
    assert "pwned" not in str(e.value)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda s: s["mergeable_ranks"].update({b"zz": "7"}), "invalid rank"),
        (lambda s: s["mergeable_ranks"].update({b"zz": 10**30}), "rank"),
        (lambda s: s.pop("pat_str"), "missing pat_str"),
        (lambda s: s.update(extra=1), "unexpected"),
        (lambda s: s.update(special_tokens={"<|bos|>": -1}), "non-negative"),
        (lambda s: s.update(special_tokens=[1]), "special_tokens must be a dict"),
        (lambda s: s.update(pat_str=b"x"), "pat_str must be a str"),
    ],
)
def test_a_wrong_typed_state_is_a_format_error(tok, tmp_path, change, message):
    state = _good_state(tok)
    state["mergeable_ranks"] = dict(state["mergeable_ranks"])
    change(state)
    p = tmp_path / "tokenizer.pkl"
    p.write_bytes(_state_pickle(state))
    with pytest.raises(FormatError, match=message):
        tokenforge.load(p)


def test_truncated_trailing_and_by_name_pickles_are_format_errors(tok, tmp_path):
    good = _state_pickle(_good_state(tok))
    p = tmp_path / "tokenizer.pkl"
    p.write_bytes(good[: len(good) // 2])
    with pytest.raises(FormatError, match="truncated|corrupt"):
        tokenforge.load(p)
    p.write_bytes(good + b"junk")
    with pytest.raises(FormatError, match="unexpected bytes"):
        tokenforge.load(p)
    p.write_bytes(_state_pickle("cl100k_base"))
    with pytest.raises(FormatError, match="registered encoding 'cl100k_base' by name"):
        tokenforge.load(p)
    # every opcode of the good file decodes (the builder is sane)
    assert sum(1 for _ in pickletools.genops(good)) > 100
