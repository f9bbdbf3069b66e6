"""``tokenforge serve``: the playground (:mod:`tokenforge.serve`) on uvicorn.

    tokenforge serve                       train small tokenizers of every family, serve them
    tokenforge serve tok.json lz/ --port 9000
    tokenforge serve bpe=out/tok/tokenforge.json        a name of your choice (in the page and its URL)

Binds to 127.0.0.1 unless ``--host`` says otherwise. Needs the ``serve`` extra
(``pip install 'tokenforge[serve]'``: starlette and uvicorn).

Not handled: TLS, more than one worker process (use uvicorn directly with
:func:`tokenforge.serve.create_app` for those).
"""

from __future__ import annotations

import argparse
import errno
import sys


def _bytes_arg(text: str) -> int:
    try:
        n = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of bytes, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number of bytes, got {text!r}")
    return n


def _port_arg(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0..65535, not {n}")
    return n


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from ..serve.app import DEFAULT_MAX_TEXT

    s = subparsers.add_parser("serve", help="a local web page showing how tokenizers cut text (needs the serve extra)")
    s.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="tokenizer files or directories of any family, as PATH or NAME=PATH (default: train small ones)",
    )
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    s.add_argument("--port", type=_port_arg, default=8765, help="port (default 8765)")
    s.add_argument(
        "--max-text",
        type=_bytes_arg,
        default=DEFAULT_MAX_TEXT,
        metavar="BYTES",
        help=f"longest text accepted, in UTF-8 bytes (default {DEFAULT_MAX_TEXT:,}; longer: HTTP 413)",
    )
    s.set_defaults(func=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn
    except ImportError:
        print("tokenforge serve needs starlette and uvicorn: pip install 'tokenforge[serve]'", file=sys.stderr)
        return 1
    from ..serve import create_app, default_tokenizers, load_tokenizers, split_name

    if args.files:
        for arg in args.files:  # a missing file is the OS-class error (exit 3), as in every command
            _, p = split_name(arg)
            if not p.exists():
                raise FileNotFoundError(errno.ENOENT, "tokenizer does not exist", str(p))
        tokenizers = load_tokenizers(args.files)
    else:
        print("no tokenizer files given: training small ones on the built-in corpus", flush=True)
        tokenizers = default_tokenizers(progress=lambda line: print(line, flush=True))
    app = create_app(tokenizers, max_text=args.max_text)
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(f"serving {', '.join(tokenizers)} on http://{host}:{args.port}/  (Ctrl-C stops)", flush=True)
    from ..serve.server import server_options

    # deadlines for a request's head and body, a bound on connections (tokenforge.serve.server)
    uvicorn.run(app, **server_options(args.host, args.port))
    return 0
