"""The playground's newer views through the JSON API: which character a byte
piece holds bytes of, a tokenizer that cannot encode all of a text, chat mode,
and the GPT tokenizers in the default set."""

import pytest
from starlette.testclient import TestClient

from serve_helpers import small_tokenizers
from tokenforge.chat import SPECIAL_TOKENS, conversation_parts
from tokenforge.eval.pieces import char_parts, encode_what_it_can, piece_bytes, unencodable_runs
from tokenforge.formats.named import NAMED
from tokenforge.serve import create_app

BPE = "bpe-1024"
CONV = {
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "2+2? 日本語 naïve"},
        {"role": "assistant", "content": [{"type": "text", "text": "4"}, {"type": "python", "text": "2+2"}]},
        {"role": "user", "content": "<|bos|> stays text"},
        {"role": "assistant", "content": "ok 🙂"},
    ]
}


@pytest.fixture(scope="module")
def toks():
    return small_tokenizers()


@pytest.fixture(scope="module")
def strict_mixedgram(toks):
    mx = toks["mixedgram"]
    return type(mx).from_bytes(mx.to_bytes(), {**mx.transport_state(), "errors": "strict"})


@pytest.fixture(scope="module")
def client(toks, strict_mixedgram):
    with TestClient(create_app({**toks, "mixedgram-strict": strict_mixedgram}, max_text=4000)) as c:
        yield c


def test_char_parts_reference_vectors():
    # 日 = e6 97 a5 cut after its second byte; then a token holding ï's last byte and "x"; ï = c3 af
    pieces = [{"hex": "e697"}, {"hex": "a5"}, "a", {"hex": "c3"}, {"hex": "af78"}]
    assert char_parts(pieces) == {
        0: [{"char": "日", "at": 0, "from": 0, "to": 2, "of": 3}],
        1: [{"char": "日", "at": 0, "from": 2, "to": 3, "of": 3}],
        3: [{"char": "ï", "at": 4, "from": 0, "to": 1, "of": 2}],
        4: [{"char": "ï", "at": 4, "from": 1, "to": 2, "of": 2}, {"char": "x", "at": 6, "from": 0, "to": 1, "of": 1}],
    }
    # a lone surrogate's three bytes (no character JSON can carry) and a stray continuation byte
    assert char_parts([{"hex": "eda0"}, {"hex": "80"}, {"hex": "80"}]) == {
        0: [{"char": None, "at": 0, "from": 0, "to": 2, "of": 3}],
        1: [{"char": None, "at": 0, "from": 2, "to": 3, "of": 3}],
        2: [{"char": None, "at": 3, "from": 0, "to": 1, "of": 1}],
    }
    assert char_parts([{"hex": "e9"}], "latin-1") == {}  # latin1: every byte is a character


def test_char_parts_rebuild_every_byte_piece(client, toks):
    text = "naïve café 日本語 🙂👋🏽 Ελληνικά"
    for name, tok in toks.items():
        r = client.post("/api/encode", json={"tokenizer": name, "text": text}).json()
        parts = r.get("parts", {})
        for k, p in enumerate(r["pieces"]):
            if not isinstance(p, dict):
                assert str(k) not in parts
                continue
            frags = parts[str(k)]
            assert b"".join(f["char"].encode()[f["from"] : f["to"]] for f in frags) == piece_bytes(p), (name, k)


def test_a_tokenizer_that_cannot_encode_the_text_shows_the_rest(client, strict_mixedgram):
    text = "café 日本語 ok 🙂!"
    with pytest.raises(ValueError):
        strict_mixedgram.encode_ordinary(text)  # the tokenizer refuses it whole
    assert unencodable_runs(text, "latin-1") == [(5, 8), (12, 13)]
    r = client.post("/api/encode", json={"tokenizer": "mixedgram-strict", "text": text})
    assert r.status_code == 200
    body = r.json()
    enc = strict_mixedgram.encode_ordinary
    first, mid, last = enc("café "), enc(" ok "), enc("!")
    assert body["ids"] == first + mid + last
    assert body["unencoded"] == [[len(first), "日本語"], [len(first) + len(mid), "🙂"]]
    assert body["exact"] is False
    assert encode_what_it_can(enc, "日本語", "latin-1") == ([], [[0, "日本語"]])
    assert encode_what_it_can(enc, "ok", "latin-1") == (enc("ok"), [])


def test_chat_mode_gives_render_conversation_ids_and_mask(client, toks):
    r = client.post("/api/chat", json={"tokenizer": BPE, "conversation": CONV, "details": True})
    assert r.status_code == 200
    body = r.json()
    ids, mask = toks[BPE].render_conversation(CONV, max_tokens=10_000)
    assert (body["ids"], body["mask"], body["missing"]) == (ids, mask, [])
    assert "unencoded" not in body
    assert body["details"][str(ids[0])] == {"special": "<|bos|>"}


def test_chat_mode_shows_what_a_tokenizer_without_the_chat_tokens_can(client, toks):
    for name, tok in toks.items():
        lacks = [s for s in SPECIAL_TOKENS if s not in tok.special_tokens and s != "<|bos|>"]
        if not lacks:
            continue
        body = client.post("/api/chat", json={"tokenizer": name, "conversation": CONV}).json()
        want_ids, want_mask, gaps = [], [], []
        for part in conversation_parts(CONV):
            if part.kind == "text":
                got = tok.encode_ordinary(part.text)
            elif part.text in tok.special_tokens or part.kind == "bos":
                got = [tok.special_tokens.get(part.text, None) or tok.get_bos_token_id()]
            else:
                gaps.append([len(want_ids), part.text])
                continue
            want_ids += got
            want_mask += [part.mask] * len(got)
        assert (body["ids"], body["mask"], body["unencoded"]) == (want_ids, want_mask, gaps), name
        assert body["missing"] == [s for s in dict.fromkeys(g[1] for g in gaps)]


def test_chat_mode_refuses_a_malformed_conversation(client):
    bad = {"messages": [{"role": "assistant", "content": "first"}]}
    r = client.post("/api/chat", json={"tokenizer": BPE, "conversation": bad})
    assert r.status_code == 400 and "expected role 'user'" in r.json()["error"]
    assert client.post("/api/chat", json={"tokenizer": "nope", "conversation": CONV}).status_code == 404
    assert client.post("/api/chat", json={"tokenizer": BPE, "conversation": CONV, "x": 1}).status_code == 400
    big = {"messages": [{"role": "user", "content": "x" * 5000}]}
    assert client.post("/api/chat", json={"tokenizer": BPE, "conversation": big}).status_code == 413


def test_the_default_set_has_the_gpt_tokenizers(toks):
    import tokenforge

    for name in NAMED:  # bpe-openai is in the dev extra: both are installed
        assert name in toks
        assert toks[name].encode("Hello, 世界") == tokenforge.load(name).encode("Hello, 世界")
