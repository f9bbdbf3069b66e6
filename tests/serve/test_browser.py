"""The playground page in a real browser: Playwright (dev extra) driving Debian's
chromium headless (``make test`` installs it) against a uvicorn server on a
free loopback port. Skipped only when chromium is absent outside CI; in CI
(``CI`` set) its absence is a failure."""

import json
import os
import re
import shutil
from urllib.parse import urlencode

import pytest
from playwright.sync_api import expect, sync_playwright

from serve_helpers import LiveServer, small_tokenizers
from tokenforge.serve import create_app

BPE = "bpe-1024"
MAX_TEXT = 50_000
LZ = "lz78-frequency_gated-nochunk-1024"


def _chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (make test installs it: apt-get install chromium)")
        pytest.skip("chromium is not installed (make test installs it: apt-get install chromium)")
    return path


@pytest.fixture(scope="module")
def toks():
    return small_tokenizers()


@pytest.fixture(scope="module")
def server(toks):
    s = LiveServer(create_app(toks, max_text=MAX_TEXT))
    yield s
    s.close()


@pytest.fixture(scope="module")
def browser():
    path = _chromium()
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    pg = context.new_page()
    errors = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg
    context.close()
    assert not errors, errors


def rendered(page):
    page.wait_for_selector("body[data-rendered='1']")


def span_ids(page, name):
    return [
        int(x)
        for x in page.eval_on_selector_all(f".panel[data-name='{name}'] .tok", "els => els.map(e => e.dataset.id)")
    ]


def open_page(page, server, **state):
    query = []
    for k, v in state.items():
        for item in v if isinstance(v, list) else [v]:
            query.append((k, item))
    page.goto(server.url + "/" + ("#" + urlencode(query) if query else ""))
    rendered(page)


def test_typed_text_spans_carry_the_tokenizers_ids(page, server, toks):
    open_page(page, server)
    assert page.eval_on_selector_all(".panel", "els => els.map(e => e.dataset.name)") == list(toks)
    text = "Héllo wörld! def f(x): return x ** 2  # 🙂 日本語"
    box = page.locator("#text")
    box.fill("")
    box.press_sequentially(text)
    rendered(page)
    assert box.input_value() == text
    for name, tok in toks.items():
        ids = tok.encode_ordinary(text)
        assert span_ids(page, name) == ids, name
        assert page.get_attribute(f".panel[data-name='{name}'] .stats", "data-tokens") == str(len(ids))
    # a piece cut inside a character is shown as its bytes
    assert page.locator(f".panel[data-name='{BPE}'] .tok.hex").count() > 0


def test_hover_shows_the_id_piece_and_detail(page, server, toks):
    open_page(page, server, t="the theory of the thing", k=[BPE, LZ])
    tok = toks[BPE]
    ids = tok.encode_ordinary("the theory of the thing")
    k = max(range(len(ids)), key=lambda j: len(tok.id_to_bytes(ids[j])))  # a merged token
    span = page.locator(f".panel[data-name='{BPE}'] .tok").nth(k)
    span.hover()
    tip = page.locator("#tip")
    tip.wait_for(state="visible")
    assert tip.get_attribute("data-id") == str(ids[k])
    text = tip.inner_text()
    assert f"id {ids[k]}" in text
    assert repr(tok.id_to_bytes(ids[k]).decode())[1:-1] in text
    assert "merge of" in text
    page.locator(f".panel[data-name='{LZ}'] .tok").nth(1).hover()
    assert "parent" in page.locator("#tip").inner_text()


def test_reload_restores_the_state(page, server, toks):
    open_page(page, server)
    page.locator("#text").fill("state in the URL")
    rendered(page)
    page.uncheck(f"#tok-list input[value='{BPE}']")
    rendered(page)
    page.check("#ws")
    rendered(page)
    page.select_option("#chunk", "on")
    rendered(page)
    page.select_option("#diff-a", BPE)
    rendered(page)
    page.select_option("#diff-b", LZ)
    rendered(page)
    url = page.url
    panels = page.eval_on_selector_all(".panel", "els => els.map(e => e.dataset.name)")
    assert BPE not in panels and LZ in panels
    page.reload()
    rendered(page)
    assert page.url == url
    assert page.locator("#text").input_value() == "state in the URL"
    assert not page.is_checked(f"#tok-list input[value='{BPE}']")
    assert page.is_checked("#ws")
    assert page.locator("#chunk").input_value() == "on"
    assert page.locator("#diff-a").input_value() == BPE
    assert page.locator("#diff-b").input_value() == LZ
    assert page.eval_on_selector_all(".panel", "els => els.map(e => e.dataset.name)") == panels
    # chunking "on" reached the LZ78 panel: its ids are the chunked encoding
    import copy
    import warnings

    chunked = copy.deepcopy(toks[LZ])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chunked.set_chunking(True)
    assert span_ids(page, LZ) == chunked.encode_ordinary("state in the URL")
    # whitespace is shown
    assert "·" in page.locator(f".panel[data-name='{LZ}'] .tokens").inner_text()
    # the same URL in a fresh page shows the same view
    other = page.context.new_page()
    other.goto(url)
    rendered(other)
    assert other.locator("#text").input_value() == "state in the URL"
    assert other.eval_on_selector_all(".panel", "els => els.map(e => e.dataset.name)") == panels


def boundaries(tok, text):
    """Character offsets where ``tok`` cuts ``text`` (ASCII text: bytes are characters)."""
    out, pos = set(), 0
    ids = tok.encode_ordinary(text)
    for i in ids[:-1]:
        pos += len(tok.id_to_bytes(i))
        out.add(pos)
    return out


def test_differences_view_marks_where_boundaries_differ(page, server, toks, tmp_path):
    text = "hello world, the theory of the thing is that the other thing"
    open_page(page, server, t=text, k=[BPE, LZ], da=BPE, db=LZ)
    assert page.locator("#diff").is_visible()
    a, b = boundaries(toks[BPE], text), boundaries(toks[LZ], text)
    assert a != b  # the known difference: LZ78 without chunking joins across spaces

    def marks(kind):
        return {
            int(x) for x in page.eval_on_selector_all(f"#diff-view .cut.{kind}", "els => els.map(e => e.dataset.pos)")
        }

    assert marks("a") == a - b
    assert marks("b") == b - a
    assert marks("both") == a & b
    assert page.get_attribute("#diff-stats", "data-differ") == str(len(a ^ b))
    assert page.locator("#diff-view").inner_text().replace("\n", "") == text
    shot = tmp_path / "playground.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("TOKENFORGE_KEEP_SCREENSHOT"):  # to look at it: the path it was copied to
        shutil.copy(shot, os.environ["TOKENFORGE_KEEP_SCREENSHOT"])


def test_texts_over_the_limit_show_an_error(page, server, toks):
    open_page(page, server, t="x", k=[BPE])
    page.evaluate(
        "t => { const box = document.getElementById('text'); box.value = t; box.dispatchEvent(new Event('input')); }",
        "y" * (MAX_TEXT + 1),
    )
    rendered(page)
    assert "413" in page.locator(f".panel[data-name='{BPE}'] .stats").inner_text()


def byte_boundaries(tok, text, encoding):
    """Where ``tok`` cuts ``text``, as offsets into the text's UTF-8 bytes (a latin1
    tokenizer's character offsets mapped to where those characters start in UTF-8)."""
    utf8_at, pos = [], 0
    for ch in text:
        utf8_at.append(pos)
        pos += len(ch.encode("utf-8"))
    utf8_at.append(pos)
    out, pos = set(), 0
    for i in tok.encode_ordinary(text)[:-1]:
        pos += len(tok.id_to_bytes(i))
        out.add(pos if encoding == "utf-8" else utf8_at[pos])
    return out


def char_starts_utf8(text):
    out, pos = set(), 0
    for ch in text:
        out.add(pos)
        pos += len(ch.encode("utf-8"))
    return out


def test_differences_across_encodings_and_hex_hover(page, server, toks):
    text = "naïve café, señor über straße"  # latin1 text: mixedgram reads it whole
    open_page(page, server, t=text, k=[BPE, "mixedgram"], da=BPE, db="mixedgram")
    a, b = byte_boundaries(toks[BPE], text, "utf-8"), byte_boundaries(toks["mixedgram"], text, "latin-1")
    assert a != b

    def marks(kind):
        return {
            int(x) for x in page.eval_on_selector_all(f"#diff-view .cut.{kind}", "els => els.map(e => e.dataset.byte)")
        }

    assert (marks("a"), marks("b"), marks("both")) == (a - b, b - a, a & b)
    # the cuts inside a character (BPE keeps "ï" as two bytes) are caught, and marked as such
    inside = a - char_starts_utf8(text)
    assert inside and marks("inside") == inside
    assert page.get_attribute("#diff-stats", "data-inside") == str(len(inside))
    assert page.locator("#diff-view").inner_text().replace("\n", "") == text
    # a piece that is part of a character: its hover shows the bytes
    hexes = page.locator(f".panel[data-name='{BPE}'] .tok.hex")
    assert hexes.count() > 0  # a 1,024-id BPE keeps "ï" as two bytes
    hexes.first.hover()
    assert "not valid UTF-8" in page.locator("#tip").inner_text()
    # text mixedgram cannot read: the differences view says it cannot compare
    page.locator("#text").fill("日本語 text")
    rendered(page)
    assert "cannot compare" in page.locator("#diff-stats").inner_text()
    assert page.locator("#diff-view .cut").count() == 0


def test_each_panel_lists_its_ids_to_copy(page, server, toks):
    text = "Copy these ids: naïve 日本語"
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    open_page(page, server, t=text, k=[BPE, LZ])
    for name in (BPE, LZ):
        area = page.locator(f".panel[data-name='{name}'] textarea.ids")
        assert json.loads(area.input_value()) == toks[name].encode_ordinary(text)
    button = page.locator(f".panel[data-name='{BPE}'] button.copy")
    button.click()
    # polled from the test, not in the page: wait_for_function's in-page polling evaluates a string,
    # which the page's Content-Security-Policy (no 'unsafe-eval') refuses whenever the first check fails
    expect(button).to_have_text("copied")
    assert json.loads(page.evaluate("navigator.clipboard.readText()")) == toks[BPE].encode_ordinary(text)


def expected_frags(tok, text):
    """Per byte token: "char:from-to/of" of each character it holds bytes of, from the text's own UTF-8 layout."""
    data = text.encode("utf-8")
    owner = []  # byte offset -> (character, its first byte, its length)
    for ch in text:
        b = ch.encode("utf-8")
        owner += [(ch, len(owner), len(b))] * len(b)
    out, pos = [], 0
    for i in tok.encode_ordinary(text):
        n = len(tok.id_to_bytes(i))
        frags = []
        try:
            tok.id_to_bytes(i).decode("utf-8")
            is_bytes = False
        except UnicodeDecodeError:  # a piece of bytes: the page shows the characters they belong to
            is_bytes = True
        if is_bytes:
            seen = []
            for b in range(pos, pos + n):
                ch, start, length = owner[b]
                if not seen or seen[-1][1] != start:
                    seen.append([ch, start, length, b - start, b - start + 1])
                else:
                    seen[-1][4] += 1
            frags = [f"{ch}:{a}-{z}/{length}" for ch, _, length, a, z in seen]
        out.append(" ".join(frags))
        pos += n
    assert pos == len(data)
    return out


def test_the_bytes_of_one_character_are_grouped(page, server, toks):
    text = "日本語 and naïve"
    open_page(page, server, t=text, k=[BPE])
    panel = f".panel[data-name='{BPE}']"
    got = page.eval_on_selector_all(f"{panel} .tok", "els => els.map(e => e.dataset.frags || '')")
    want = expected_frags(toks[BPE], text)
    assert got == want and any(want)  # a 1,024-id BPE cuts these characters into bytes
    # the tokens that share one character sit in one group, which holds that character's bytes whole
    groups = page.eval_on_selector_all(
        f"{panel} .chargroup", "gs => gs.map(g => [...g.querySelectorAll('.tok')].map(e => Number(e.dataset.id)))"
    )
    assert groups
    tok = toks[BPE]
    for ids in groups:
        assert len(ids) > 1
        tok.decode_bytes(ids).decode("utf-8")  # whole characters: valid UTF-8 together

    # each part shows the character and which of its bytes it holds ("1/3": its first byte, "2–3/3")
    def label(frag):
        a, z, n = (int(x) for x in re.match(r".*:(\d+)-(\d+)/(\d+)$", frag).groups())
        return "" if (a, z) == (0, n) else (f"{z}" if z - a == 1 else f"{a + 1}–{z}") + f"/{n}"

    subs = page.eval_on_selector_all(
        f"{panel} .tok.part", "els => els.map(e => [...e.querySelectorAll('sub')].map(s => s.textContent))"
    )
    assert subs == [[label(f) for f in w.split(" ") if label(f)] for w in want if w]
    first = page.locator(f"{panel} .tok.part").first
    assert first.inner_text().startswith("日")
    first.hover()
    assert 'of "日" (U+65E5)' in page.locator("#tip").inner_text()


CONV = {
    "messages": [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "What is 2 + 2? 日本語"},
        {"role": "assistant", "content": [{"type": "text", "text": "4."}, {"type": "python", "text": "2 + 2"}]},
    ]
}


def test_chat_mode_shows_specials_and_the_loss_mask_per_tokenizer(page, server, toks):
    open_page(page, server, m="chat", c=json.dumps(CONV), k=[BPE, LZ])
    assert page.locator("#conv").is_visible() and not page.locator("#text").is_visible()
    ids, mask = toks[BPE].render_conversation(CONV, max_tokens=10_000)
    panel = f".panel[data-name='{BPE}']"
    assert span_ids(page, BPE) == ids
    classes = page.eval_on_selector_all(f"{panel} .tok", "els => els.map(e => e.className)")
    assert ["m1" in c.split() for c in classes] == [m == 1 for m in mask]
    specials = set(toks[BPE].special_tokens.values())
    assert ["special" in c.split() for c in classes] == [i in specials for i in ids]
    assert json.loads(page.locator(f"{panel} textarea.ids").input_value()) == ids
    assert f"{sum(mask)} trained" in page.locator(f"{panel} .stats").inner_text()
    # LZ78 has no chat tokens: its panel cuts the text and marks where each special token would be
    lz = f".panel[data-name='{LZ}']"
    missing = page.eval_on_selector_all(f"{lz} .missing", "els => els.map(e => e.textContent)")
    assert missing == [
        "<|user_start|>",
        "<|user_end|>",
        "<|assistant_start|>",
        "<|python_start|>",
        "<|python_end|>",
        "<|assistant_end|>",
    ]
    assert "no <|user_start|>" in page.locator(f"{lz} .stats").inner_text()
    # editing the conversation re-renders it; the URL keeps it
    conv2 = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    page.locator("#conv").fill(json.dumps(conv2))
    rendered(page)
    assert span_ids(page, BPE) == toks[BPE].render_conversation(conv2)[0]
    page.reload()
    rendered(page)
    assert json.loads(page.locator("#conv").input_value()) == conv2
    page.locator("#conv").fill("{not json")
    rendered(page)
    assert "not JSON" in page.locator("#status").inner_text()


@pytest.fixture(scope="module")
def strict_server(toks):
    mx = toks["mixedgram"]
    strict = type(mx).from_bytes(mx.to_bytes(), {**mx.transport_state(), "errors": "strict"})
    s = LiveServer(create_app({BPE: toks[BPE], "mixedgram-strict": strict}, max_text=MAX_TEXT))
    yield s, strict
    s.close()


def test_a_tokenizer_that_cannot_encode_the_text_shows_what_it_can(page, strict_server):
    server, strict = strict_server
    text = "café 日本語 ok 🙂"
    open_page(page, server, t=text)
    panel = ".panel[data-name='mixedgram-strict']"
    enc = strict.encode_ordinary
    assert span_ids(page, "mixedgram-strict") == enc("café ") + enc(" ok ")
    assert page.eval_on_selector_all(f"{panel} .missing", "els => els.map(e => e.textContent)") == ["日本語", "🙂"]
    assert page.locator(f"{panel} .tokens").inner_text() == text  # the text, cut where it can be, marked where not
    assert "cannot encode 4 characters" in page.locator(f"{panel} .stats").inner_text()
    assert page.locator(f"{panel} .err").count() == 0
