"""Take the playground's screenshots in docs/ with Debian's chromium (headless, through Playwright).

    python scripts/playground_screenshots.py [--out docs] [--chromium PATH]

Trains the playground's small default tokenizers (1,024 ids, 300 kB of the built-in corpus; the GPT
tokenizers join them when bpe-openai is installed), adds a strict mixedgram (one that refuses text outside
latin1), serves them on a free loopback port and saves one PNG per view:

- ``playground-ids.png``: a panel with its list of ids, ready to copy;
- ``playground-bytes.png``: characters cut into bytes, grouped, each token saying which bytes it holds;
- ``playground-chat.png``: chat mode, a conversation with its special tokens and loss mask per tokenizer;
- ``playground-partial.png``: a tokenizer that cannot encode all of a text shows what it can.

Not handled: other browsers; pixel-exact output (fonts differ between machines).
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import sys
import threading
import time
import warnings
from pathlib import Path
from urllib.parse import urlencode

# characters the fonts of a plain Debian chromium draw (no CJK or emoji fonts there): 2- and 3-byte UTF-8
TEXT = "Tokenizers cut naïve text: 12 €, Ελληνικά, кириллица → ✓\n"
CHAT = {
    "messages": [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "What is 2 + 2? Also in Ελληνικά."},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "4 (τέσσερα)."}, {"type": "python", "text": "2 + 2"}],
        },
    ]
}


def serve(app):
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the playground did not start")
        time.sleep(0.02)
    return server, thread, f"http://127.0.0.1:{sock.getsockname()[1]}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "docs"))
    ap.add_argument(
        "--chromium", default=shutil.which("chromium"), help="the browser's executable (default: chromium on PATH)"
    )
    args = ap.parse_args(argv)
    if not args.chromium:
        print("chromium is not installed: apt-get install chromium", file=sys.stderr)
        return 3
    from playwright.sync_api import sync_playwright

    import tokenforge
    from tokenforge.serve import create_app, default_tokenizers

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tokenforge.TokenforgeWarning)
        toks = default_tokenizers(
            vocab_size=1024, max_bytes=300_000, progress=lambda line: print(line, file=sys.stderr)
        )
    mx = toks["mixedgram"]
    toks["mixedgram-strict"] = type(mx).from_bytes(mx.to_bytes(), {**mx.transport_state(), "errors": "strict"})
    server, thread, url = serve(create_app(toks))
    out = Path(args.out)
    views = {
        "playground-ids.png": dict(t=TEXT, k=["bpe-1024", "cl100k_base" if "cl100k_base" in toks else "growing-1024"]),
        "playground-bytes.png": dict(t="12 € → ✓ naïve ünïcödé Ελληνικά", k=["bpe-1024", "lz78-frequency_gated-1024"]),
        "playground-chat.png": dict(
            m="chat", c=json.dumps(CHAT, ensure_ascii=False, indent=1), k=["bpe-1024", "lz78-frequency_gated-1024"]
        ),
        "playground-partial.png": dict(t="café Ελληνικά ok → déjà vu", k=["mixedgram-strict", "mixedgram"]),
    }
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=args.chromium, headless=True)
            page = browser.new_page(viewport={"width": 1100, "height": 800})
            for name, state in views.items():
                query = [(k, item) for k, v in state.items() for item in (v if isinstance(v, list) else [v])]
                page.goto(url + "/#" + urlencode(query))
                page.wait_for_selector("body[data-rendered='1']")
                page.locator("main").screenshot(path=str(out / name))
                print(f"wrote {out / name}", file=sys.stderr)
            browser.close()
    finally:
        server.should_exit = True
        thread.join(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
