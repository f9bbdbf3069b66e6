"""The playground page in a real browser: Playwright (dev extra) driving Debian's
chromium headless (``make test`` installs it) against a uvicorn server on a
free loopback port. Skipped only when chromium is absent outside CI; in CI
(``CI`` set) its absence is a failure."""

import os
import shutil
from urllib.parse import urlencode

import pytest
from playwright.sync_api import sync_playwright

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


def char_boundaries(tok, text, encoding):
    """Where ``tok`` cuts ``text``, in character offsets (a cut inside a UTF-8 character at its start)."""
    data = text.encode(encoding)
    char_at, pos = {}, 0
    for i, ch in enumerate(text):
        char_at[pos] = i
        pos += len(ch.encode(encoding))
    out, pos = set(), 0
    for i in tok.encode_ordinary(text)[:-1]:
        pos += len(tok.id_to_bytes(i))
        b = pos
        while b not in char_at:
            b -= 1
        out.add(char_at[b])
    assert pos <= len(data)
    return out


def test_differences_across_encodings_and_hex_hover(page, server, toks):
    text = "naïve café, señor über straße"  # latin1 text: mixedgram reads it whole
    open_page(page, server, t=text, k=[BPE, "mixedgram"], da=BPE, db="mixedgram")
    a, b = char_boundaries(toks[BPE], text, "utf-8"), char_boundaries(toks["mixedgram"], text, "latin-1")
    assert a != b

    def marks(kind):
        return {
            int(x) for x in page.eval_on_selector_all(f"#diff-view .cut.{kind}", "els => els.map(e => e.dataset.pos)")
        }

    assert (marks("a"), marks("b"), marks("both")) == (a - b, b - a, a & b)
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
