"""The playground's JSON API (tokenforge.serve.app): answers equal the tokenizers'
own encode, pieces rebuild the bytes, family details, and every limit as a 4xx."""

import asyncio
import json

import httpx  # the dev extra; starlette and uvicorn are the serve extra (make test installs both)
import pytest
from starlette.testclient import TestClient

from serve_helpers import LiveServer, small_tokenizers
from tokenforge import registry
from tokenforge.serve import body_limit, create_app, piece_bytes

MAX_TEXT = 2000
TEXTS = [
    "",
    "hello world",
    "héllo wörld, naïve café\n\tdef f(x):\n        return x ** 2  # 12345",
    "日本語のテキストと🙂👋🏽 emoji",
    "a\x00b\r\n  \u00a0\u2028end",
]


@pytest.fixture(scope="module")
def toks():
    return small_tokenizers()


@pytest.fixture(scope="module")
def client(toks):
    with TestClient(create_app(toks, max_text=MAX_TEXT)) as c:
        yield c


def encode(client, **body):
    return client.post("/api/encode", json=body)


def test_listing(client, toks):
    r = client.get("/api/tokenizers")
    assert r.status_code == 200
    listing = r.json()
    assert listing["max_text"] == MAX_TEXT
    assert [t["name"] for t in listing["tokenizers"]] == list(toks)
    for t in listing["tokenizers"]:
        tok = toks[t["name"]]
        assert t["family"] == tok.family
        assert t["vocab_size"] == tok.vocab_size
        assert t["encoding"] == ("latin-1" if tok.family == "mixedgram" else "utf-8")
        assert t["chunking"] == (tok.chunking if tok.family == "lz78" else None)
    assert {t["family"] for t in listing["tokenizers"]} == set(registry.BUILT_IN)


@pytest.mark.parametrize("text", TEXTS)
def test_ids_and_pieces(client, toks, text):
    for name, tok in toks.items():
        r = encode(client, tokenizer=name, text=text)
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["ids"] == list(tok.encode_ordinary(text))
        assert len(out["pieces"]) == len(out["ids"])
        enc = "latin-1" if tok.family == "mixedgram" else "utf-8"
        joined = b"".join(piece_bytes(p, enc) for p in out["pieces"])
        assert joined == tok.decode_bytes(out["ids"])
        assert out["num_bytes"] == len(joined)
        assert out["num_chars"] == len(text)
        for p, i in zip(out["pieces"], out["ids"]):
            raw = tok.id_to_bytes(i)
            if isinstance(p, str):
                assert p.encode(enc) == raw
            else:  # hex only for bytes that are not text
                assert set(p) == {"hex"} and bytes.fromhex(p["hex"]) == raw
                with pytest.raises(UnicodeDecodeError):
                    raw.decode(enc)
        try:
            same = joined == text.encode(enc)
        except UnicodeEncodeError:
            same = False
        assert out["exact"] is same
        if tok.family in ("bpe", "lz78"):  # byte-level: every text comes back whole
            assert out["exact"] is True


def test_piece_cut_inside_a_character_is_hex(client, toks):
    out = encode(client, tokenizer="bpe-1024", text="🙂").json()
    assert out["pieces"] and all(isinstance(p, dict) for p in out["pieces"])
    assert b"".join(bytes.fromhex(p["hex"]) for p in out["pieces"]) == "🙂".encode()


def test_lone_surrogate_round_trips_as_hex(client, toks):
    # JSON may carry a lone surrogate; the tokenizers encode it as its three "surrogatepass" bytes
    body = json.dumps({"tokenizer": "bpe-1024", "text": "a\ud800b"}).encode()
    out = client.post("/api/encode", content=body).json()
    assert out["ids"] == toks["bpe-1024"].encode_ordinary("a\ud800b")
    assert b"".join(piece_bytes(p) for p in out["pieces"]) == "a\ud800b".encode("utf-8", "surrogatepass")
    assert out["exact"] is False


def test_details_per_family(client, toks):
    text = "the theory of the thing, there and then: hello hello world"
    for name, tok in toks.items():
        out = encode(client, tokenizer=name, text=text, details=True).json()
        details = out["details"]
        assert set(details) == {str(i) for i in out["ids"]}
        for i in set(out["ids"]):
            d = details[str(i)]
            raw = tok.id_to_bytes(i)
            if "byte" in d:
                assert raw == bytes([d["byte"]])
            elif tok.family in ("bpe", "growing"):
                assert piece_bytes(d["left"]["piece"]) + piece_bytes(d["right"]["piece"]) == raw
                assert raw == tok.id_to_bytes(d["left"]["id"]) + tok.id_to_bytes(d["right"]["id"])
                if tok.family == "growing":
                    assert d["source"] == "round1"
            elif tok.family == "lz78":
                assert (d["parent"]["pattern"] + d["char"]).encode() == raw
            elif tok.family == "mixedgram":
                assert d["n"] == len(raw) >= 2 and d["count"] > 0
        multi = [d for i, d in details.items() if len(tok.id_to_bytes(int(i))) > 1]
        assert multi, f"{name}: no multi-byte token in {text!r}"


def test_lz78_chunking_toggle(client, toks):
    import copy
    import warnings

    text = "hello world, the theory of everything"
    for name, tok in toks.items():
        if tok.family != "lz78":
            r = encode(client, tokenizer=name, text=text, chunking=True)
            assert r.status_code == 400 and "LZ78" in r.json()["error"]
            continue
        for chunking in (True, False):
            other = copy.deepcopy(tok)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                other.set_chunking(chunking)
            out = encode(client, tokenizer=name, text=text, chunking=chunking).json()
            assert out["ids"] == other.encode_ordinary(text)
        assert encode(client, tokenizer=name, text=text, chunking=None).json()["ids"] == tok.encode_ordinary(text)
    # the two settings differ for the dictionary trained without chunking (its entries cross word boundaries)
    a = encode(client, tokenizer="lz78-frequency_gated-nochunk-1024", text=text, chunking=True).json()["ids"]
    b = encode(client, tokenizer="lz78-frequency_gated-nochunk-1024", text=text, chunking=False).json()["ids"]
    assert a != b


def test_text_limit_is_413(client):
    name = "bpe-1024"
    assert encode(client, tokenizer=name, text="a" * MAX_TEXT).status_code == 200
    r = encode(client, tokenizer=name, text="a" * (MAX_TEXT + 1))
    assert r.status_code == 413 and "limit" in r.json()["error"]
    # the limit is on UTF-8 bytes, not characters: 1,001 two-byte characters are 2,002 bytes
    assert encode(client, tokenizer=name, text="é" * (MAX_TEXT // 2)).status_code == 200
    assert encode(client, tokenizer=name, text="é" * (MAX_TEXT // 2 + 1)).status_code == 413
    assert encode(client, tokenizer=name, text="🙂" * (MAX_TEXT // 4 + 1)).status_code == 413


def test_body_limit_is_413_before_parsing(client):
    limit = body_limit(MAX_TEXT)
    # a body over the limit is refused whatever it holds (it is not parsed: this one is not even JSON)
    r = client.post("/api/encode", content=b"x" * (limit + 1))
    assert r.status_code == 413
    # the same without a Content-Length (chunked): counted while reading
    r = client.post("/api/encode", content=iter([b"x" * 1000] * (limit // 1000 + 2)))
    assert r.status_code == 413
    # a declared length over the limit is refused before the body is read
    r = client.post(
        "/api/encode", content=b'{"tokenizer": "bpe-1024", "text": ""}', headers={"Content-Length": str(limit + 1)}
    )
    assert r.status_code == 413
    # the largest JSON escaping of a text at the limit still fits
    text = "\x01" * MAX_TEXT
    body = json.dumps({"tokenizer": "bpe-1024", "text": text}).encode()
    assert len(body) > 6 * MAX_TEXT - 1
    assert client.post("/api/encode", content=body).status_code == 200


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"{bad",
        b"\xff\xfe{}",
        b"[1, 2]",
        b'"text"',
        b"null",
        b"[" * 50_000,  # nested deeper than the parser goes, under the body limit
        b'{"tokenizer": 5, "text": "a"}',
        b'{"tokenizer": "bpe-1024", "text": null}',
        b'{"tokenizer": "bpe-1024"}',
        b'{"text": "a"}',
        b'{"tokenizer": "bpe-1024", "text": ["a"]}',
        b'{"tokenizer": "bpe-1024", "text": "a", "details": 1}',
        b'{"tokenizer": "lz78-frequency_gated-1024", "text": "a", "chunking": "yes"}',
        b'{"tokenizer": "bpe-1024", "text": "a", "extra": 1}',
        b'{"tokenizer": ["bpe-1024"], "text": "a"}',
        b'{"tokenizer": "bpe-1024", "text": "a", "text": 3}',
    ],
)
def test_malformed_is_400(client, body):
    r = client.post("/api/encode", content=body)
    assert r.status_code == 400, (body[:60], r.status_code, r.text[:200])
    assert r.json()["error"]


def test_unknown_names_are_404(client):
    r = encode(client, tokenizer="no-such-tokenizer", text="a")
    assert r.status_code == 404 and "bpe-1024" in r.json()["error"]
    assert client.get("/static/nothing.js").status_code == 404
    assert client.get("/static/index.html").status_code == 404
    assert client.get("/api/nothing").status_code == 404
    assert client.get("/api/encode").status_code == 405


def test_page_and_assets_are_local(client):
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    for ref in ("/static/app.js", "/static/style.css"):
        assert ref in page.text
        assert client.get(ref).status_code == 200
    for body in (page.text, client.get("/static/app.js").text, client.get("/static/style.css").text):
        assert "http://" not in body and "https://" not in body  # nothing from elsewhere


def test_create_app_refuses_bad_arguments(toks):
    from tokenforge.errors import TokenforgeError

    with pytest.raises(TokenforgeError):
        create_app({}, max_text=10)
    with pytest.raises(TokenforgeError):
        create_app(toks, max_text=0)
    with pytest.raises(TokenforgeError):
        create_app({"": toks["bpe-1024"]})


def test_100_concurrent_requests_on_loopback(toks):
    server = LiveServer(create_app(toks, max_text=MAX_TEXT))
    try:
        names = list(toks)
        jobs = [
            (names[k % len(names)], f"request {k}: {'héllo wörld ' * (k % 7)} the end {k * 7919}") for k in range(100)
        ]

        async def run():
            async with httpx.AsyncClient(base_url=server.url, timeout=60) as c:
                return await asyncio.gather(*(c.post("/api/encode", json={"tokenizer": n, "text": t}) for n, t in jobs))

        answers = asyncio.run(run())
    finally:
        server.close()
    assert len(answers) == 100
    for (name, text), r in zip(jobs, answers):
        assert r.status_code == 200
        assert r.json()["tokenizer"] == name
        assert r.json()["ids"] == toks[name].encode_ordinary(text)


def test_a_family_outside_the_registry_is_served_without_detail():
    from toy_family import CharTokenizer

    tok = CharTokenizer.train_from_iterator(["hello wörld, hello again"] * 3, 300)
    with TestClient(create_app({"toy": tok})) as c:
        assert c.get("/api/tokenizers").json()["tokenizers"][0]["family"] == "toy"
        out = c.post("/api/encode", json={"tokenizer": "toy", "text": "hello 🙂", "details": True}).json()
        assert out["ids"] == tok.encode_ordinary("hello 🙂")
        assert b"".join(piece_bytes(p) for p in out["pieces"]) == "hello 🙂".encode()
        assert all(d == {} for d in out["details"].values())


def test_lz78_compressed_details(toks):
    from tokenforge.serve import TokenInfo

    tok = toks["lz78-frequency_gated-1024"].to_compressed()
    info = TokenInfo(tok)
    text = "the theory of the thing, there and then"
    multi = [i for i in dict.fromkeys(tok.encode_ordinary(text)) if i <= tok.num_codes]
    assert multi
    for i in multi:
        d = info.detail(i)
        assert (d["parent"]["pattern"] + d["edge"]).encode() == tok.id_to_bytes(i)
    assert info.detail(tok.byte_fallback_id(0xC3)) == {"byte": 0xC3}
