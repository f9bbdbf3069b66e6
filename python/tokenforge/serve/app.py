"""The playground's ASGI app: one page, its three assets, and a JSON API.

``GET /`` the page; ``GET /static/{app.js,style.css}`` its script and style
(shipped in the package, nothing fetched from elsewhere: the Content-Security-Policy
says so to the browser too).

``GET /api/tokenizers`` → ``{"tokenizers": [{"name", "family", "vocab_size",
"encoding", "chunking"}], "max_text": BYTES}``; ``chunking`` is an LZ78
tokenizer's own setting (null for the other families).

``POST /api/encode`` with ``{"tokenizer": NAME, "text": TEXT}`` and optionally
``"chunking": true|false`` (LZ78 only: encode with or without its pre-tokenizer
split) and ``"details": true`` → ``{"tokenizer", "ids", "pieces", "num_bytes",
"num_chars", "exact"}`` (+ ``"details": {"<id>": {...}}`` for each distinct id).
A piece is the token's text, or ``{"hex": "..."}`` for bytes that are not valid
in the tokenizer's text encoding (:mod:`tokenforge.eval.pieces`); the pieces'
bytes joined are the bytes the tokenizer saw. ``exact`` says whether those are
the text's own bytes (false when the tokenizer normalised the text, NFC for the
growing vocabulary, or replaced characters it cannot read, mixedgram's latin1).
``"parts": {"<k>": [{"char", "at", "from", "to", "of"}, ...]}`` says, for each
byte piece ``k``, which characters it holds bytes of and which bytes
(:func:`~tokenforge.eval.pieces.char_parts`). A tokenizer that refuses the
text because its text encoding cannot hold some characters (a strict
mixedgram outside latin1) encodes the rest: ``"unencoded": [[k, RUN], ...]``
names each run it left out and the index of the first id after it.

``POST /api/chat`` with ``{"tokenizer": NAME, "conversation": {"messages":
[...]}}`` (nanochat's conversation, :mod:`tokenforge.chat`) and optionally
``"details"`` → the same fields (but ``num_chars`` and ``exact``) plus
``"mask"`` (the loss mask, one value per id) and ``"missing"`` (the chat
special tokens the tokenizer lacks, each shown as an ``"unencoded"`` run where
it would be). With every special token, ids and mask are ``render_conversation``'s.

Limits, each a 4xx with ``{"error": message}``, never a 500 for bad input: a
body longer than the text limit allows (``Content-Length`` is checked before
reading, the bytes read are counted while reading) or a text longer than
``max_text`` UTF-8 bytes → 413; an unknown tokenizer → 404; a body that is not
a JSON object, a field of the wrong type, an unknown field or a malformed
conversation → 400; an input the tokenizer refuses for another reason than its
text encoding (a TokenforgeError) → 422. Encoding runs in Starlette's worker
threads (the core releases the GIL), never on the event loop.

A request body must arrive within ``body_timeout`` seconds (408 otherwise); a
client that disconnects while sending it is one line in the log
(:data:`tokenforge.serve.server.LOG`). The request head's deadline and the bound
on connections are the server's (:func:`tokenforge.serve.server.server_options`).

Not handled: authentication (the server binds to loopback by default; anyone
who can reach the port can use it), batching many texts in one request,
special tokens in the text (it is encoded with ``encode_ordinary``; chat mode
places the chat special tokens), a conversation cut to a model's context
(``render_conversation``'s ``max_tokens``: the playground shows it all).
"""

from __future__ import annotations

import asyncio
import json
from importlib import resources
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..chat import conversation_parts
from ..errors import TokenforgeError
from ..eval.pieces import TokenInfo, char_parts, encode_what_it_can, unencodable_runs
from ..registry import family_of
from .server import BODY_TIMEOUT, LOG

if TYPE_CHECKING:
    from ..base import Tokenizer

__all__ = ["create_app", "DEFAULT_MAX_TEXT", "body_limit"]

#: the default limit on a text's UTF-8 bytes (``--max-text``)
DEFAULT_MAX_TEXT = 1_000_000

#: JSON writes one text byte as at most 6 characters (``\u0000``); the rest of
#: the request object is small
_ESCAPE_FACTOR = 6
_ENVELOPE = 64 * 1024

_CSP = "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"


def body_limit(max_text: int) -> int:
    """The largest request body accepted for a text limit of ``max_text`` bytes."""
    return _ESCAPE_FACTOR * max_text + _ENVELOPE


class _Served:
    """One tokenizer the server answers for, and its twin with the other chunking
    when its family's record has a ``chunking_twin`` hook (LZ78)."""

    def __init__(self, name: str, tok: Tokenizer) -> None:
        self.name = name
        self.tok = tok
        self.info = TokenInfo(tok)
        self.chunking: bool | None = None
        self._twin: Tokenizer | None = None
        fam = family_of(tok)
        if fam is not None and fam.chunking_twin is not None:
            self.chunking, self._twin = fam.chunking_twin(tok)

    def describe(self) -> dict:
        return {
            "name": self.name,
            "family": self.tok.family,
            "vocab_size": int(self.tok.vocab_size),
            "encoding": self.info.encoding,
            "chunking": self.chunking,
        }

    def _ids(self, tok: Tokenizer, text: str) -> tuple[list[int], list]:
        """The ids of ``text``, and the runs the tokenizer could not encode
        (:func:`~tokenforge.eval.pieces.encode_what_it_can`; none when it took it whole)."""
        try:
            return [int(i) for i in tok.encode_ordinary(text)], []
        except TokenforgeError:
            if not unencodable_runs(text, self.info.encoding):
                raise  # refused for another reason: the 422 says which
            ids, gaps = encode_what_it_can(tok.encode_ordinary, text, self.info.encoding)
            return [int(i) for i in ids], gaps

    def _view(self, ids: list[int], gaps: list, details: bool) -> dict:
        """What every answer shows of ``ids``: pieces, their bytes, the characters
        the byte pieces belong to, the left-out runs, and the details."""
        info = self.info
        pieces, num_bytes = info.pieces(ids)
        out: dict[str, Any] = {"ids": ids, "pieces": pieces, "num_bytes": num_bytes}
        parts = char_parts(pieces, info.encoding)
        if parts:
            out["parts"] = {str(k): v for k, v in parts.items()}
        if gaps:
            out["unencoded"] = gaps
        if details:
            out["details"] = {str(i): info.detail(i) for i in dict.fromkeys(ids)}
        return out

    def encode(self, text: str, chunking: bool | None, details: bool) -> dict:
        tok = self.tok
        if chunking is not None and chunking != self.chunking and self._twin is not None:
            tok = self._twin
        ids, gaps = self._ids(tok, text)
        view = self._view(ids, gaps, details)
        enc = self.info.encoding
        try:
            exact = (
                not gaps and view["num_bytes"] == len(text.encode(enc)) and tok.decode_bytes(ids) == text.encode(enc)
            )
        except UnicodeEncodeError:  # a lone surrogate, a character latin1 lacks
            exact = False
        return {"tokenizer": self.name, **view, "num_chars": len(text), "exact": exact}

    def chat(self, conversation: list[dict], details: bool) -> dict:
        """A conversation as this tokenizer renders it (:func:`tokenforge.chat.conversation_parts`):
        ids and loss mask, as ``render_conversation`` gives them when the tokenizer has
        every chat special token; a special token it lacks is shown as a gap
        (``"unencoded"``, with ``"missing"``: the special tokens it lacks) in its place."""
        tok = self.tok
        specials = tok.special_tokens
        ids: list[int] = []
        mask: list[int] = []
        gaps: list = []
        missing: list[str] = []
        for part in conversation_parts(conversation):
            if part.kind == "text":
                got, more = self._ids(tok, part.text)
                gaps += [[len(ids) + k, run] for k, run in more]
            else:
                sid = specials.get(part.text)
                if part.kind == "bos" and sid is None:
                    try:
                        sid = tok.get_bos_token_id()
                    except TokenforgeError:
                        sid = None
                if sid is None:
                    gaps.append([len(ids), part.text])
                    missing += [] if part.text in missing else [part.text]
                    continue
                got = [int(sid)]
            ids += got
            mask += [part.mask] * len(got)
        return {"tokenizer": self.name, **self._view(ids, gaps, details), "mask": mask, "missing": missing}


class _BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _json_object(body: bytes) -> dict:
    try:
        req = json.loads(body)
    except (UnicodeDecodeError, ValueError) as e:  # JSONDecodeError is a ValueError
        raise _BadRequest(400, f"the body is not JSON ({e})") from None
    except RecursionError:
        raise _BadRequest(400, "the body is JSON nested too deeply") from None
    if not isinstance(req, dict):
        raise _BadRequest(400, f"the body must be a JSON object, not {type(req).__name__}")
    return req


def _asset(name: str) -> bytes:
    return resources.files(__package__).joinpath("static").joinpath(name).read_bytes()


def create_app(
    tokenizers: Mapping[str, Any],
    *,
    max_text: int = DEFAULT_MAX_TEXT,
    title: str = "tokenforge playground",
    body_timeout: float = BODY_TIMEOUT,
) -> Any:
    """The Starlette app serving ``tokenizers`` (name → tokenizer, in the order shown).

    ``max_text``: the longest text accepted, in UTF-8 bytes (longer → 413).
    ``body_timeout``: seconds a request may take to send its body (longer → 408);
    a client that disconnects while sending it is logged in one line."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    if isinstance(max_text, bool) or not isinstance(max_text, int) or max_text < 1:
        raise TokenforgeError(f"max_text must be a positive number of bytes, not {max_text!r}")
    if not tokenizers:
        raise TokenforgeError("the playground needs at least one tokenizer")
    served = {}
    for name, tok in tokenizers.items():
        if not isinstance(name, str) or not name:
            raise TokenforgeError(f"a tokenizer's name must be a non-empty str, not {name!r}")
        served[name] = _Served(name, tok)
    limit = body_limit(max_text)
    assets = {
        "index.html": ("text/html; charset=utf-8", _asset("index.html").replace(b"{{title}}", title.encode())),
        "app.js": ("text/javascript; charset=utf-8", _asset("app.js")),
        "style.css": ("text/css; charset=utf-8", _asset("style.css")),
    }
    listing = {"tokenizers": [s.describe() for s in served.values()], "max_text": max_text}

    def error(status: int, message: str) -> JSONResponse:
        return JSONResponse({"error": message}, status_code=status)

    def asset(name: str) -> Response:
        kind, body = assets[name]
        return Response(body, media_type=kind, headers={"Content-Security-Policy": _CSP, "Cache-Control": "no-cache"})

    async def page(request: Request) -> Response:
        return asset("index.html")

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in assets or name == "index.html":
            return error(404, f"no such asset: {name}")
        return asset(name)

    async def list_tokenizers(request: Request) -> Response:
        return JSONResponse(listing)

    async def read_body(request: Request) -> bytes:
        length = request.headers.get("content-length")
        if length is not None:
            if not length.isdigit():
                raise _BadRequest(400, "Content-Length is not a number")
            if int(length) > limit:
                raise _BadRequest(413, f"the request body ({int(length):,} bytes) is over the limit of {limit:,} bytes")
        chunks: list[bytes] = []

        async def receive() -> None:
            size = 0
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise _BadRequest(413, f"the request body is over the limit of {limit:,} bytes")
                chunks.append(chunk)

        try:
            await asyncio.wait_for(receive(), body_timeout)
        except asyncio.TimeoutError:
            raise _BadRequest(408, f"the request body did not arrive within {body_timeout:g} s") from None
        return b"".join(chunks)

    def parse(body: bytes) -> tuple[_Served, str, bool | None, bool]:
        req = _json_object(body)
        unknown = set(req) - {"tokenizer", "text", "chunking", "details"}
        if unknown:
            raise _BadRequest(400, f"unknown field(s): {', '.join(sorted(unknown))}")
        name, text = req.get("tokenizer"), req.get("text")
        if not isinstance(name, str):
            raise _BadRequest(400, '"tokenizer" must be a string (a name from GET /api/tokenizers)')
        if not isinstance(text, str):
            raise _BadRequest(400, '"text" must be a string')
        chunking, details = req.get("chunking"), req.get("details", False)
        if chunking is not None and not isinstance(chunking, bool):
            raise _BadRequest(400, '"chunking" must be true, false or null')
        if not isinstance(details, bool):
            raise _BadRequest(400, '"details" must be true or false')
        s = served.get(name)
        if s is None:
            raise _BadRequest(404, f"no tokenizer named {name!r}; known: {', '.join(served)}")
        if chunking is not None and s.chunking is None:
            raise _BadRequest(400, f'"chunking" applies to LZ78 tokenizers only; {name!r} is {s.tok.family}')
        # the limit is on the text's UTF-8 bytes; a character is at most 4 (a lone surrogate, 3)
        if len(text) > max_text or (4 * len(text) > max_text and len(text.encode("utf-8", "surrogatepass")) > max_text):
            raise _BadRequest(413, f"the text is over the limit of {max_text:,} UTF-8 bytes")
        return s, text, chunking, details

    def parse_chat(body: bytes) -> tuple[_Served, Any, bool]:
        req = _json_object(body)
        unknown = set(req) - {"tokenizer", "conversation", "details"}
        if unknown:
            raise _BadRequest(400, f"unknown field(s): {', '.join(sorted(unknown))}")
        name, conversation, details = req.get("tokenizer"), req.get("conversation"), req.get("details", False)
        if not isinstance(name, str):
            raise _BadRequest(400, '"tokenizer" must be a string (a name from GET /api/tokenizers)')
        if not isinstance(details, bool):
            raise _BadRequest(400, '"details" must be true or false')
        try:
            conversation_parts(conversation)  # its shape: a bad one is the request's fault
        except TokenforgeError as e:
            raise _BadRequest(400, f'"conversation": {e}') from None
        if len(json.dumps(conversation, ensure_ascii=False).encode("utf-8", "surrogatepass")) > max_text:
            raise _BadRequest(413, f"the conversation is over the limit of {max_text:,} UTF-8 bytes")
        s = served.get(name)
        if s is None:
            raise _BadRequest(404, f"no tokenizer named {name!r}; known: {', '.join(served)}")
        return s, conversation, details

    async def answer(request: Request, parse_body: Callable[[bytes], tuple], work: Callable[..., dict]) -> Response:
        try:
            parsed = parse_body(await read_body(request))
        except _BadRequest as e:
            return error(e.status, e.message)
        except ClientDisconnect:  # one line, not a traceback: a closed browser tab is not a server error
            client = f"{request.client.host}:{request.client.port}" if request.client else "a client"
            LOG.warning("%s disconnected while sending its request body", client)
            return Response(status_code=400)  # (nobody reads it)
        try:
            out = await run_in_threadpool(work, *parsed)
        except TokenforgeError as e:
            return error(422, f"{parsed[0].name}: {e}")
        return JSONResponse(out)

    async def encode(request: Request) -> Response:
        return await answer(request, parse, lambda s, text, chunking, details: s.encode(text, chunking, details))

    async def chat(request: Request) -> Response:
        return await answer(request, parse_chat, lambda s, conversation, details: s.chat(conversation, details))

    routes = [
        Route("/", page, methods=["GET"]),
        Route("/static/{name}", static, methods=["GET"]),
        Route("/api/tokenizers", list_tokenizers, methods=["GET"]),
        Route("/api/encode", encode, methods=["POST"]),
        Route("/api/chat", chat, methods=["POST"]),
    ]
    app = Starlette(routes=routes)
    app.state.tokenizers = served
    app.state.max_text = max_text
    return app
