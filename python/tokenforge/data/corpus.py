"""Streaming corpus readers: text, JSON lines and parquet, plain or compressed.

The one corpus rule every function that takes a corpus follows lives here
(:func:`corpus_source`): a path or a list/tuple of paths (``str`` or
``os.PathLike``) names files; a ``str`` that names no existing file or directory
is a :class:`CorpusError` saying what to pass, never a text. Texts come as an
iterator of str (``learn_merges``, ``pretokenize``, ``iter_documents``) or
through ``train_from_iterator(texts)`` (:func:`iterator_documents`);
``train(corpus)`` reads files only (:func:`corpus_paths`, :func:`train_documents`).

:func:`iter_documents` turns a path, a directory, a list of paths or an
iterable of str into a stream of str, reading files in bounded memory, so a
corpus larger than RAM can feed a trainer. :func:`corpus_bytes` estimates the
input size for a progress bar (:mod:`tokenforge.progress`).

Formats, chosen by file suffix (case-insensitive):

``.txt``      blocks of at most ``block_bytes`` bytes, each ending at a line
              boundary (only a single line longer than ``block_bytes`` is cut
              mid-line, at a character boundary); or, with ``split_on``, the
              documents between occurrences of a separator.
``.jsonl``    one JSON object per line; its ``text_field`` string is a document.
``.parquet``  the ``text_field`` column, one row group at a time (pyarrow).

Each may end in ``.gz`` (gzip) or ``.zst`` (zstandard). pyarrow and zstandard
are imported only when a file needs them (the ``io`` extra).

The readers also read a byte range of an uncompressed file, or some row
groups of a parquet file, exactly as they read that part of the whole file
(:func:`file_documents`; :mod:`tokenforge.data.partition` plans the ranges),
and open fsspec URLs there.

Not handled: other encodings than UTF-8, JSON arrays (``.json``), CSV, and
remote URLs as ``iter_documents`` sources (read them through
:mod:`tokenforge.data.partition`).
"""

from __future__ import annotations

import codecs
import gzip
import io
import os
import re
import sys
import zlib
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Iterable, Iterator, Protocol, TypeGuard, cast

from ..errors import CorpusError
from ..formats._jsonutil import JsonProblem, loads_checked, lone_surrogate_escape
from ..progress import Progress, progress_bar

__all__ = [
    "iter_documents",
    "corpus_paths",
    "corpus_source",
    "train_documents",
    "iterator_documents",
    "corpus_documents",
    "Texts",
    "check_errors",
    "check_options",
    "file_documents",
    "file_size",
    "open_binary",
    "url_filesystem",
    "is_url",
    "is_jsonl",
    "corpus_bytes",
    "corpus_files",
    "jsonl_blocks",
    "jsonl_block_documents",
    "JsonlBlock",
    "FORMATS",
    "COMPRESSIONS",
]

#: file formats iter_documents reads, by suffix
FORMATS = (".txt", ".jsonl", ".parquet")
#: compression suffixes that may follow a format suffix
COMPRESSIONS = (".gz", ".zst")

_EXTRA_HINT = "pip install 'tokenforge[io]'"

#: a code point of a UTF-16 surrogate half, which no UTF-8 text holds
_SURROGATE = re.compile("[\ud800-\udfff]")


# ---------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------
class Reader(Protocol):
    """What the readers read a file through: the file, a decompressor over it, or
    :class:`_Limited` (a byte range of it)."""

    def read(self, n: int = -1, /) -> bytes: ...

    def tell(self) -> int: ...


def _corpus_error(
    message: str, path: str | os.PathLike[str], *, line: int | None = None, offset: int | None = None
) -> CorpusError:
    """A CorpusError whose text starts with the file, line and byte offset (as FormatError's does)."""
    where = [str(path)]
    if line is not None:
        where.append(f"line {line}")
    if offset is not None:
        where.append(f"byte offset {offset}")
    err = CorpusError(f"{', '.join(where)}: {message}")
    err.path, err.line, err.offset = str(path), line, offset
    return err


def check_errors(errors: str) -> None:
    """Refuse an unknown UTF-8 error handler now (LookupError) rather than at
    the first bad byte, and the two that would make lone surrogates, which no
    tokenizer can encode."""
    codecs.lookup_error(errors)
    if errors in ("surrogateescape", "surrogatepass"):
        raise CorpusError(
            f"errors={errors!r} would put lone surrogates into the text, which cannot be tokenized; "
            "use 'strict', 'replace' or 'ignore'"
        )


def check_options(split_on: str | None, block_bytes: int, errors: str) -> None:
    """Refuse bad reading options now (ValueError, LookupError, CorpusError), as
    :func:`iter_documents` does before it reads anything."""
    if not isinstance(block_bytes, int) or block_bytes < 4:
        raise ValueError(f"block_bytes must be an int >= 4, got {block_bytes!r}")
    if split_on is not None and (not isinstance(split_on, str) or not split_on):
        raise ValueError("split_on must be a non-empty str (or None)")
    check_errors(errors)


def _decode(
    data: bytes,
    path: str | os.PathLike[str],
    offset: int,
    errors: str,
    *,
    line: int | None = None,
    compressed: bool = False,
) -> str:
    """Decode UTF-8; an error names the file and the absolute byte offset of the bad byte."""
    try:
        return data.decode("utf-8", errors)
    except UnicodeDecodeError as e:
        of = " of the decompressed data" if compressed else ""
        raise _corpus_error(
            f"invalid UTF-8 ({e.reason}, byte {data[e.start : e.start + 1]!r}){of}; "
            "pass errors='replace' to read it with U+FFFD in place of bad bytes",
            path,
            line=line,
            offset=offset + e.start,
        ) from None


# ---------------------------------------------------------------------------
# which files
# ---------------------------------------------------------------------------
def is_url(path: object) -> TypeGuard[str]:
    """Whether ``path`` is an fsspec URL (a str with ``"://"``, e.g. ``"s3://bucket/a.txt"``)."""
    return isinstance(path, str) and "://" in path


def _kind(path: str | os.PathLike[str]) -> tuple[str, str] | None:
    """``(format, compression)`` of a file (a path or a URL) from its suffixes,
    e.g. ``(".jsonl", ".gz")``; None if unknown."""
    name = (path.rstrip("/").rsplit("/", 1)[-1] if is_url(path) else Path(path).name).lower()
    compression = ""
    for c in COMPRESSIONS:
        if name.endswith(c):
            compression, name = c, name[: -len(c)]
            break
    for fmt in FORMATS:
        if name.endswith(fmt):
            return fmt, compression
    return None


def _kind_of(path: str | os.PathLike[str]) -> tuple[str, str]:
    """:func:`_kind` of a file the corpus rule has let through (a supported suffix)."""
    kind = _kind(path)
    if kind is None:
        raise _corpus_error(f"unsupported corpus file suffix; expected {_supported()}", path)
    return kind


def is_jsonl(path: str | os.PathLike[str]) -> bool:
    """Whether a corpus file is JSON lines (``.jsonl``, plain, ``.gz`` or ``.zst``)."""
    kind = _kind(path)
    return kind is not None and kind[0] == ".jsonl"


def _supported() -> str:
    return f"{', '.join(FORMATS)}, each optionally followed by {' or '.join(COMPRESSIONS)}"


def _expand(path: Path, from_str: bool) -> list[Path]:
    """A file as itself; a directory as its corpus files, recursively, in sorted order."""
    if path.is_dir():
        files = [
            p
            for p in sorted(path.rglob("*"))
            if p.is_file()
            and _kind(p) is not None
            and not any(part.startswith(".") for part in p.relative_to(path).parts)
        ]
        if not files:
            raise _corpus_error(f"directory holds no corpus files ({_supported()})", path)
        return files
    if not path.exists():
        hint = "; a str source is read as a path (pass [text] to read a string itself)" if from_str else ""
        raise FileNotFoundError(f"no such corpus file or directory: {path}{hint}")
    if _kind(path) is None:
        raise _corpus_error(f"unsupported corpus file suffix; expected {_supported()}", path)
    return [path]


def _paths_of(source: object) -> list[Path] | None:
    """The corpus files a source names, or None when the source is an iterable of texts
    (the corpus rule, :func:`corpus_source`: a list or tuple names files)."""
    if isinstance(source, Texts):
        return None
    if isinstance(source, os.PathLike):
        return _expand(Path(source), from_str=False)
    if isinstance(source, (str, list, tuple)):
        if not source:
            return []
        return [f for p in corpus_paths(source, who="iter_documents") for f in _expand(p, from_str=False)]
    if isinstance(source, (bytes, bytearray)):
        raise TypeError("iter_documents: source is bytes; pass a path, a list of paths or an iterator of str")
    return None


def corpus_files(source: object) -> list[Path]:
    """The files :func:`iter_documents` would read, in order (empty for an iterable of str)."""
    return _paths_of(source) or []


def corpus_bytes(source: object) -> int | None:
    """Estimated input size in bytes, for a progress bar's total.

    Files count their size on disk (compressed size for ``.gz``/``.zst``, which
    is also what :func:`iter_documents` reports progress in). A list or tuple of
    str counts its UTF-8 bytes. Any other iterable gives None: it cannot be
    measured without consuming it.
    """
    paths = _paths_of(source)
    if paths is not None:
        return sum(p.stat().st_size for p in paths)
    texts = source.texts if isinstance(source, Texts) else None
    if isinstance(texts, (list, tuple)):
        # "surrogatepass": a lone surrogate counts its 3 bytes, as tokenizers encode it (tokenforge.base)
        return sum(len(s.encode("utf-8", "surrogatepass")) for s in texts if isinstance(s, str))
    return None


# ---------------------------------------------------------------------------
# opening (decompression) and progress metering
# ---------------------------------------------------------------------------
def _import_zstandard(path: str | os.PathLike[str]) -> Any:
    try:
        import zstandard
    except ImportError:
        raise _corpus_error(f"reading .zst files needs the zstandard package: {_EXTRA_HINT}", path) from None
    return zstandard


def _import_parquet(path: str | os.PathLike[str]) -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise _corpus_error(f"reading .parquet files needs the pyarrow package: {_EXTRA_HINT}", path) from None
    return pq


def _import_fsspec(path: str | os.PathLike[str]) -> Any:
    try:
        import fsspec
    except ImportError:
        raise _corpus_error("reading a URL needs the fsspec package: pip install 'tokenforge[dask]'", path) from None
    return fsspec


def url_filesystem(path: str | os.PathLike[str]) -> tuple[Any, str]:
    """``(filesystem, path in it)`` of an fsspec URL."""
    return _import_fsspec(path).core.url_to_fs(path)


def open_binary(path: str | os.PathLike[str]) -> IO[bytes]:
    """A local path with ``open``, an fsspec URL (:func:`is_url`) with its filesystem: a binary file."""
    if is_url(path):
        fs, inner = url_filesystem(path)
        return fs.open(inner, "rb")
    return open(path, "rb")


def file_size(path: str | os.PathLike[str]) -> int:
    """Size in bytes of a local file or of an fsspec URL's file."""
    if is_url(path):
        fs, inner = url_filesystem(path)
        size = fs.size(inner)
        if size is None:
            raise _corpus_error("its filesystem does not report its size, which reading in parts needs", path)
        return int(size)
    return Path(path).stat().st_size


class _Limited:
    """The bytes of a binary file up to offset ``end`` (a stream that needs only
    ``read`` and ``tell``): a byte range read as if the file ended there."""

    def __init__(self, raw: Reader, end: int) -> None:
        self.raw, self.end = raw, end

    def read(self, n: int = -1) -> bytes:
        left = self.end - self.raw.tell()
        if left <= 0:
            return b""
        return self.raw.read(left if n is None or n < 0 else min(n, left))

    def tell(self) -> int:
        return self.raw.tell()


def _open_stream(
    stack: ExitStack, path: str | os.PathLike[str], compression: str, start: int = 0
) -> tuple[Reader, IO[bytes]]:
    """``(stream, raw)``: a binary stream of the decompressed bytes and the file on disk under it
    (an uncompressed one positioned at ``start``)."""
    raw = stack.enter_context(open_binary(path))
    if start:
        raw.seek(start)
    if compression == ".gz":
        return stack.enter_context(gzip.GzipFile(fileobj=raw, mode="rb")), raw
    if compression == ".zst":
        zstandard = _import_zstandard(path)
        reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True, closefd=False)
        return stack.enter_context(reader), raw
    return raw, raw


def _decompression_errors() -> tuple[type[BaseException], ...]:
    errs: list[type[BaseException]] = [gzip.BadGzipFile, zlib.error, EOFError]
    zstandard = sys.modules.get("zstandard")
    if zstandard is not None:
        errs.append(zstandard.ZstdError)
    return tuple(errs)


class _Meter:
    """Reports how far into a file on disk reading has got, as progress deltas
    (for a byte range, from ``start`` up to ``end`` at most)."""

    def __init__(self, raw: Reader, progress: Progress | None, start: int = 0, end: int | None = None) -> None:
        self.raw, self.progress, self.done, self.end = raw, progress, start, end

    def tick(self) -> None:
        if self.progress is None:
            return
        pos = self.raw.tell() if self.end is None else min(self.raw.tell(), self.end)
        if pos > self.done:
            self.progress.update(pos - self.done)
            self.done = pos


def _read_full(stream: Reader, n: int) -> bytes:
    """Read up to ``n`` bytes, short only at end of stream (some decompressors return less)."""
    parts, got = [], 0
    while got < n:
        chunk = stream.read(n - got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


# ---------------------------------------------------------------------------
# .txt
# ---------------------------------------------------------------------------
def _utf8_prefix_len(buf: bytearray) -> int:
    """Length of the longest prefix of ``buf`` that does not end inside a UTF-8 character.

    Looks at the last character only; bytes that are not UTF-8 at all are left
    whole for the decoder to report.
    """
    n = len(buf)
    k = n - 1
    while k > 0 and n - k < 4 and (buf[k] & 0xC0) == 0x80:
        k -= 1
    lead = buf[k]
    need = 2 if lead >> 5 == 0b110 else 3 if lead >> 4 == 0b1110 else 4 if lead >> 3 == 0b11110 else 1
    return k if 0 < k and k + need > n else n


def _txt_blocks(
    stream: Reader,
    path: str | os.PathLike[str],
    meter: _Meter,
    block_bytes: int,
    errors: str,
    compressed: bool,
    start: int = 0,
    stop: int | None = None,
) -> Iterator[str]:
    """Blocks of at most ``block_bytes`` bytes ending at a newline; memory stays under one block.

    ``stream`` positioned at ``start``, a block start of the reading from the
    file's start (tokenforge.data.partition finds them), gives the blocks of
    that reading from there; they end at ``stop``, another block start, which
    the last block's window may read past (by less than one block).
    """
    buf = bytearray()
    offset = start  # position of buf[0] in the (decompressed) file
    while stop is None or offset < stop:
        data = _read_full(stream, block_bytes - len(buf))
        buf += data
        meter.tick()
        if not buf:
            return
        if not data:  # end of file: the rest, which is at most one block
            cut = len(buf)
        else:
            cut = buf.rfind(b"\n") + 1 or _utf8_prefix_len(buf)
        yield _decode(bytes(buf[:cut]), path, offset, errors, compressed=compressed)
        del buf[:cut]
        offset += cut


def _txt_documents(
    stream: Reader,
    path: str | os.PathLike[str],
    meter: _Meter,
    sep: str,
    block_bytes: int,
    errors: str,
    compressed: bool,
    start: int = 0,
) -> Iterator[str]:
    """The non-empty documents between occurrences of ``sep``; memory holds one document plus one block.

    Occurrences are found left to right, never overlapping, so the reading of
    a stream that starts at ``start``, the end of one of those occurrences,
    and ends at the end of a later one, is that part of the whole reading.
    """
    sep_b = sep.encode("utf-8")
    buf = bytearray()
    offset = start  # position of buf[0] in the (decompressed) file
    scanned = 0  # buf[:scanned] is known to hold no separator start
    while True:
        data = stream.read(block_bytes)
        buf += data
        meter.tick()
        start = 0
        while True:
            i = buf.find(sep_b, max(start, scanned))
            if i < 0:
                break
            if i > start:
                yield _decode(bytes(buf[start:i]), path, offset + start, errors, compressed=compressed)
            start = i + len(sep_b)
        # Compact once per block, not once per document: deleting a prefix
        # moves the rest of the buffer, and per-document moves would be
        # quadratic in the number of small documents per block.
        del buf[:start]
        offset += start
        scanned = max(0, len(buf) - len(sep_b) + 1)
        if not data:
            if buf:
                yield _decode(bytes(buf), path, offset, errors, compressed=compressed)
            return


# ---------------------------------------------------------------------------
# .jsonl
# ---------------------------------------------------------------------------
def _lines(stream: Reader, meter: _Meter, block_bytes: int) -> Iterator[bytes]:
    """Lines (with their newline) of a binary stream that need only ``read``."""
    pending: list[bytes] = []  # pieces of a line that spans blocks, joined once complete
    while True:
        data = stream.read(block_bytes)
        meter.tick()
        if not data:
            if pending:
                yield b"".join(pending)
            return
        lines = data.split(b"\n")
        if len(lines) == 1:
            pending.append(data)
            continue
        pending.append(lines[0])
        yield b"".join(pending) + b"\n"
        for line in lines[1:-1]:
            yield line + b"\n"
        pending = [lines[-1]] if lines[-1] else []


def _jsonl_line(
    raw_line: bytes,
    path: str | os.PathLike[str],
    lineno: int | None,
    offset: int,
    text_field: str,
    errors: str,
    compressed: bool,
) -> str | None:
    """The ``text_field`` string of one JSON line (with or without its newline); None to skip it."""
    line = _decode(raw_line, path, offset, errors, line=lineno, compressed=compressed)
    if lineno == 1:
        line = line.lstrip("\ufeff")
    if not line.strip():
        return None
    try:
        # No depth limit before parsing (a line of code may hold many brackets
        # in its text); a line nested too deeply for the parser is a JsonProblem.
        obj = loads_checked(line, max_depth=None, surrogates=False)
    except JsonProblem as e:
        raise _corpus_error(f"not valid JSON ({e.message}{e.where()})", path, line=lineno) from None
    if not isinstance(obj, dict):
        raise _corpus_error(f"expected a JSON object, got {type(obj).__name__}", path, line=lineno)
    if text_field not in obj:
        fields = ", ".join(map(repr, obj)) or "none"
        raise _corpus_error(
            f"no {text_field!r} field (fields: {fields}); choose one with text_field=", path, line=lineno
        )
    text = obj[text_field]
    if text is not None and not isinstance(text, str):
        raise _corpus_error(f"field {text_field!r} is {type(text).__name__}, expected a string", path, line=lineno)
    if text and (b"\\ud" in raw_line or b"\\uD" in raw_line) and _SURROGATE.search(text):
        # json.loads joins escaped pairs; what is left is a lone half ("\ud83d")
        if errors == "strict":
            escape, column = lone_surrogate_escape(line)
            raise _corpus_error(
                f"field {text_field!r} holds the escape {escape} (at column {column}), half of a UTF-16 "
                "surrogate pair and not a character; pass errors='replace' (--errors replace) to read it as U+FFFD "
                "(or 'ignore' to drop it)",
                path,
                line=lineno,
            )
        text = _SURROGATE.sub("" if errors == "ignore" else "\ufffd", text)
    return text


def _jsonl_documents(
    stream: Reader,
    path: str | os.PathLike[str],
    meter: _Meter,
    text_field: str,
    block_bytes: int,
    errors: str,
    compressed: bool,
    start: int = 0,
) -> Iterator[str]:
    """The ``text_field`` string of each JSON line; blank lines and null values are skipped.

    ``stream`` may start at ``start``, a line start: the line numbers of its
    lines are then counted only if an error needs one (:func:`_lines_before`),
    so reading a range costs nothing for the lines before it.
    """
    offset = start
    first = 1 if start == 0 else None
    for k, raw_line in enumerate(_lines(stream, meter, block_bytes)):
        if first is not None:
            text = _jsonl_line(raw_line, path, first + k, offset, text_field, errors, compressed)
        else:
            try:  # the line number is not known yet: None (which is not line 1: no BOM is stripped)
                text = _jsonl_line(raw_line, path, None, offset, text_field, errors, compressed)
            except CorpusError:
                first = _lines_before(path, start) + 1
                # the same line again, which fails the same way, now naming its line
                text = _jsonl_line(raw_line, path, first + k, offset, text_field, errors, compressed)
        offset += len(raw_line)
        if text is not None:
            yield text


def _lines_before(path: str | os.PathLike[str], start: int) -> int:
    """Newlines in the first ``start`` bytes of an uncompressed file (read in
    bounded blocks): the line number of a range's first line, minus one."""
    count, at = 0, 0
    with open_binary(path) as f:
        while at < start:
            data = f.read(min(1 << 20, start - at))
            if not data:
                break
            count += data.count(b"\n")
            at += len(data)
    return count


@dataclass(frozen=True)
class JsonlBlock:
    """Whole lines of a JSON-lines file: ``head + body[:end]``.

    ``head`` is the start of the first line, left over from the previous read
    (no newline in it); ``body`` is what the last read returned, of which the
    lines up to ``end`` belong here. Two parts, so that a reader hands on what
    it read without copying it; :attr:`data` joins them.
    """

    path: Path
    head: bytes
    body: bytes
    end: int
    offset: int  #: byte offset of the block's first byte in the (decompressed) file

    @property
    def data(self) -> bytes:
        return self.head + self.body[: self.end]

    @property
    def compressed(self) -> bool:
        return bool(_kind_of(self.path)[1])

    def count_lines(self) -> int:
        """Lines in the block (a last line without a newline counts)."""
        n = self.head.count(b"\n") + self.body.count(b"\n", 0, self.end)
        last = self.body[self.end - 1 : self.end] if self.end else self.head[-1:]
        return n + (bool(last) and last != b"\n")


def jsonl_blocks(
    paths: Iterable[Path],
    block_bytes: int = 4 << 20,
    progress: Progress | None = None,
    start: int = 0,
    end: int | None = None,
) -> Iterator[JsonlBlock]:
    """The lines of ``.jsonl`` files (plain, .gz or .zst) in blocks of about
    ``block_bytes`` bytes that end at line boundaries (a longer line is one
    block). ``progress`` is updated with bytes read from disk. Pair with
    :func:`jsonl_block_documents`, which reads a block exactly as
    :func:`iter_documents` reads the file. ``start``/``end``: only that byte
    range of one uncompressed file (a partition's, which begins at a line start)."""
    if not isinstance(block_bytes, int) or block_bytes < 1:
        raise ValueError(f"block_bytes must be a positive int, got {block_bytes!r}")
    for path in paths:
        path = Path(path)
        kind = _kind(path)
        if kind is None or kind[0] != ".jsonl":
            raise CorpusError(f"{path}: not a JSON-lines file ({_supported()})")
        if (start or end is not None) and kind[1]:
            raise ValueError(f"{path}: a byte range of a compressed file")  # (the planner never makes one)
        with ExitStack() as stack:
            stream, raw = _open_stream(stack, path, kind[1], start)
            if end is not None:
                stream = _Limited(raw, end)
            meter = _Meter(raw, progress, start, end)
            pieces: list[bytes] = []  # the start of a line, from earlier reads
            offset = start
            try:
                while True:
                    body = _read_full(stream, block_bytes)
                    meter.tick()
                    if not body:
                        if pieces:
                            yield JsonlBlock(path, b"".join(pieces), b"", 0, offset)
                        break
                    cut = body.rfind(b"\n") + 1  # (not `end`: that is the byte range's, for every file)
                    if not cut:  # still inside one long line: joined once it ends
                        pieces.append(body)
                        continue
                    head = b"".join(pieces)
                    yield JsonlBlock(path, head, body, cut, offset)
                    offset += len(head) + cut
                    pieces = [body[cut:]] if cut < len(body) else []
            except _decompression_errors() as e:
                raise _corpus_error(f"corrupt {kind[1]} stream: {e}", path) from None


def jsonl_block_documents(
    block: JsonlBlock, first_line: int, text_field: str = "text", errors: str = "strict"
) -> Iterator[str]:
    """The documents of one :class:`JsonlBlock` whose first line is line
    ``first_line`` (1-based) of its file, with the errors (file, line, byte
    offset) :func:`iter_documents` gives for the same file."""
    data, offset = block.data, block.offset
    start, lineno, compressed = 0, first_line, block.compressed
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end + 1
        text = _jsonl_line(data[start:end], block.path, lineno, offset + start, text_field, errors, compressed)
        if text is not None:
            yield text
        start, lineno = end, lineno + 1


# ---------------------------------------------------------------------------
# .parquet
# ---------------------------------------------------------------------------
def _parquet_documents(
    path: str | os.PathLike[str],
    compression: str,
    text_field: str,
    progress: Progress | None,
    row_groups: tuple[int, int] | None = None,
) -> Iterator[str]:
    """The ``text_field`` column, one row group in memory at a time; nulls are skipped.

    ``row_groups`` ``(first, stop)`` reads only those row groups (None: all).
    A compressed parquet file (rare: parquet compresses its pages itself) is
    decompressed into memory first, because pyarrow needs to seek in it.
    """
    pq = _import_parquet(path)
    import pyarrow as pa

    with ExitStack() as files:
        size = file_size(path)
        try:
            source: io.BytesIO | IO[bytes] | str
            if compression:
                with ExitStack() as stack:
                    stream, _ = _open_stream(stack, path, compression)
                    source = io.BytesIO(stream.read())
            elif is_url(path):
                source = files.enter_context(open_binary(path))
            else:
                source = str(path)
            pf = pq.ParquetFile(source)
        except (pa.ArrowException, OSError, *_decompression_errors()) as e:
            raise _corpus_error(f"cannot read as parquet: {e}", path) from None
        yield from _row_groups(pf, path, size, text_field, progress, row_groups)


def _row_groups(
    pf: Any,
    path: str | os.PathLike[str],
    size: int,
    text_field: str,
    progress: Progress | None,
    row_groups: tuple[int, int] | None,
) -> Iterator[str]:
    """The documents of an open ``pq.ParquetFile``'s row groups ``row_groups`` (None: all)."""
    import pyarrow as pa

    schema = pf.schema_arrow
    if text_field not in schema.names:
        raise _corpus_error(
            f"no column {text_field!r} (columns: {', '.join(schema.names)}); choose one with text_field=", path
        )
    col_type = schema.field(text_field).type
    if not (pa.types.is_string(col_type) or pa.types.is_large_string(col_type)):
        raise _corpus_error(f"column {text_field!r} has type {col_type}, expected a string column", path)
    groups = pf.num_row_groups
    first, stop = (0, groups) if row_groups is None else row_groups
    if not 0 <= first <= stop <= groups:
        raise _corpus_error(f"row groups {first}..{stop} asked for, the file has {groups}", path)
    reported = size * first // groups if groups else 0
    for g in range(first, stop):
        try:
            column = pf.read_row_group(g, columns=[text_field]).column(0)
        except pa.ArrowException as e:
            raise _corpus_error(f"row group {g}: {e}", path) from None
        for text in column.to_pylist():
            if text is not None:
                yield text
        if progress is not None:
            # Row groups have no on-disk size that sums to the file's, so
            # progress advances by an equal share of the file per group.
            share = size * (g + 1) // groups
            progress.update(share - reported)
            reported = share


# ---------------------------------------------------------------------------
# the entry point
# ---------------------------------------------------------------------------
def file_documents(
    path: str | os.PathLike[str],
    *,
    text_field: str = "text",
    split_on: str | None = None,
    block_bytes: int = 1 << 20,
    errors: str = "strict",
    progress: Progress | None = None,
    start: int = 0,
    end: int | None = None,
    row_groups: tuple[int, int] | None = None,
) -> Iterator[str]:
    """The documents of one corpus file (a ``Path``, or an fsspec URL), as
    :func:`iter_documents` reads it; options unchecked (:func:`check_options`).

    Of an uncompressed ``.txt``/``.jsonl`` file, only the byte range
    ``[start, end)`` (``end`` None: to the end), which must start and end where
    the reading of the whole file ends a document (a line start for
    ``.jsonl``, the end of a separator for ``split_on``, a block start for
    ``.txt`` blocks): that reading's documents in the range, with the same
    errors (absolute byte offsets, true line numbers) and progress (the
    range's bytes). Of a parquet file, the row groups ``row_groups``.
    """
    fmt, compression = _kind_of(path)
    if fmt == ".parquet":
        yield from _parquet_documents(path, compression, text_field, progress, row_groups)
        return
    if (start or end is not None) and compression:
        raise _corpus_error(f"a byte range of a {compression} file cannot be read on its own", path)
    with ExitStack() as stack:
        stream, raw = _open_stream(stack, path, compression, start)
        meter = _Meter(raw, progress, start, end)
        compressed = bool(compression)
        if end is not None and (fmt == ".jsonl" or split_on is not None):
            stream = _Limited(raw, end)
        if fmt == ".jsonl":
            docs = _jsonl_documents(stream, path, meter, text_field, block_bytes, errors, compressed, start)
        elif split_on is not None:
            docs = _txt_documents(stream, path, meter, split_on, block_bytes, errors, compressed, start)
        else:
            docs = _txt_blocks(stream, path, meter, block_bytes, errors, compressed, start, end)
        try:
            yield from docs
        except _decompression_errors() as e:
            raise _corpus_error(f"corrupt {compression} stream: {e}", path) from None


def _text_documents(texts: Iterable, progress: Progress | None) -> Iterator[str]:
    """An iterable of str passed through, checking each item's type."""
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"iter_documents: item {i} is {type(text).__name__}, expected str")
        if progress is not None:
            progress.update(len(text.encode("utf-8", "surrogatepass")))
        yield text


def iter_documents(
    source: object,
    *,
    text_field: str = "text",
    split_on: str | None = None,
    block_bytes: int = 1 << 20,
    progress: bool | Progress | None = None,
    errors: str = "strict",
) -> Iterator[str]:
    """Stream the documents of a corpus as str.

    ``source`` is one of:

    - a path (``str`` or ``pathlib.Path``) to a file, or to a directory read
      recursively in sorted path order (hidden entries and files with other
      suffixes are skipped);
    - a list or tuple of paths (``str`` or ``pathlib.Path``; a ``str`` that
      names no existing file is a :class:`CorpusError`, never a text);
    - a :class:`Texts`, or any other iterable of str (an iterator, a generator):
      texts, passed through unchanged (the corpus rule, :func:`corpus_source`).

    ``text_field`` names the JSON field / parquet column. ``split_on`` (e.g.
    ``"<|endoftext|>"``) makes ``.txt`` files yield the non-empty documents
    between separators (never the separator); without it ``.txt`` files yield
    blocks of at most ``block_bytes`` bytes ending at line boundaries (a
    longer line is cut at a character boundary). ``split_on`` does not apply
    to JSON lines, parquet or str sources, whose items are documents already.
    ``errors`` is the UTF-8 error handler: "strict" raises :class:`CorpusError`
    naming the file and byte offset; "replace" substitutes U+FFFD. It applies
    to a lone surrogate escape in a JSON line's text (``"\\ud83d"``) too:
    "strict" names the file and line, "replace" gives U+FFFD, "ignore" drops it.
    ``progress`` is None/False (silent), True (a bar over :func:`corpus_bytes`)
    or a :class:`~tokenforge.progress.Progress` to update with bytes read from disk.

    The source is checked now (missing files, unknown suffixes, bad
    arguments); files are opened and read lazily as the result is iterated.
    """
    check_options(split_on, block_bytes, errors)
    paths = _paths_of(source)
    if paths is None and not isinstance(source, Texts):
        try:
            iter(cast(Iterable[str], source))  # any other iterable is texts: iter() says whether it is one
        except TypeError:
            raise TypeError(
                f"iter_documents: source must be a path, a list of paths or an iterable of str, "
                f"not {type(source).__name__}"
            ) from None
    options = dict(text_field=text_field, split_on=split_on, block_bytes=block_bytes, errors=errors)
    return _generate(source.texts if isinstance(source, Texts) else source, paths, progress, options)


# ---------------------------------------------------------------------------
# the corpus rule of every family: train(corpus) reads files, train_from_iterator(texts) takes texts
# ---------------------------------------------------------------------------
def _exists(s: str) -> bool:
    try:
        return 0 < len(s) and "\0" not in s and Path(s).exists()
    except (OSError, ValueError):  # too long for a file name, ...
        return False


#: what every corpus error tells the user to pass instead
_TEXTS_HINT = (
    "a str or a list of str names files; to pass texts, give an iterator of str (e.g. iter(texts)) "
    "or use train_from_iterator"
)


def corpus_source(corpus: object, *, who: str) -> object:
    """The corpus rule of every function that takes files or texts (``learn_merges``,
    ``pretokenize``, ``count_pieces``, the cluster path, ``iter_documents``):

    - a ``str`` or ``os.PathLike``, or a list/tuple of them, names files: returned as
      :func:`corpus_paths` gives them (fsspec URLs kept as they are); a ``str`` that
      names no existing file or directory is a :class:`CorpusError` saying what to pass;
    - a :class:`Texts`, or any other iterable (an iterator, a generator), is texts:
      returned as a :class:`Texts`.

    A list of texts is never read as the corpus: ``pretokenize(glob.glob("*.txt"), ...)``
    with no match, or ``learn_merges(["some text"])``, is an error, not 3 tokens."""
    if isinstance(corpus, Texts):
        return corpus
    if isinstance(corpus, (bytes, bytearray, memoryview)):
        raise TypeError(f"{who}: the corpus is bytes; pass a path, a list of paths or an iterator of str")
    if isinstance(corpus, (str, os.PathLike, list, tuple)):
        items = list(corpus) if isinstance(corpus, (list, tuple)) else [corpus]
        if any(is_url(item) for item in items):
            for item in items:
                if not is_url(item):
                    corpus_paths(item, who=who)
            return corpus
        return corpus_paths(corpus, who=who)
    texts = cast(Iterable[str], corpus)  # any other iterable is texts: iter() says whether it is one
    try:
        iter(texts)
    except TypeError:
        raise TypeError(
            f"{who}: the corpus must be a path, a list of paths or an iterator of str, not {type(corpus).__name__}"
        ) from None
    return Texts(texts)


def corpus_paths(corpus: object, *, who: str = "train") -> list[Path]:
    """``train(corpus)``'s argument as paths: a path or a non-empty list/tuple of
    paths, each a ``str`` or ``os.PathLike``. A ``str`` that names no existing file
    or directory is a :class:`CorpusError` (texts go to ``train_from_iterator``);
    a missing ``PathLike`` is left to the reader (``FileNotFoundError``)."""
    if isinstance(corpus, (str, os.PathLike)):
        items = [corpus]
    elif isinstance(corpus, (list, tuple)):
        items = list(corpus)
        if not items:
            raise CorpusError(f"{who}: the list of corpus paths is empty")
    elif isinstance(corpus, (bytes, bytearray, memoryview)):
        raise TypeError(f"{who}: the corpus is bytes; pass a path or a list of paths")
    else:
        raise TypeError(
            f"{who}: the corpus must be a path or a list of paths (str or pathlib.Path), not "
            f"{type(corpus).__name__}; to train on texts (an iterable of str) use train_from_iterator"
        )
    out = []
    for i, item in enumerate(items):
        if isinstance(item, os.PathLike):
            out.append(Path(item))
        elif isinstance(item, str):
            if not _exists(item):
                shown = item if len(item) <= 80 else item[:40] + "..." + item[-37:]
                where = "" if len(items) == 1 else f" (item {i})"
                raise CorpusError(f"{who}: {shown!r}{where} is not an existing file or directory; {_TEXTS_HINT}")
            out.append(Path(item))
        else:
            raise TypeError(f"{who}: corpus item {i} is {type(item).__name__}; expected a path (str or pathlib.Path)")
    return out


def train_documents(
    corpus: object,
    *,
    who: str = "train",
    text_field: str = "text",
    split_on: str | None = None,
    errors: str = "strict",
    progress: bool | Progress | None = None,
) -> Iterator[str]:
    """The documents of ``train(corpus)`` (:func:`corpus_paths`, then :func:`iter_documents`).
    Items that are fsspec URLs (``"s3://bucket/a.jsonl"``) name one file each and are read
    through their filesystem, in order with the local ones."""
    items = list(corpus) if isinstance(corpus, (list, tuple)) else [corpus]
    if not any(is_url(item) for item in items):
        return iter_documents(
            corpus_paths(corpus, who=who), text_field=text_field, split_on=split_on, errors=errors, progress=progress
        )
    check_options(split_on, 1 << 20, errors)
    for item in items:  # refuse a bad item now, as for local paths, not when reading gets there
        if is_url(item):
            if _kind(item) is None:
                raise _corpus_error(
                    f"unsupported corpus file suffix; expected {_supported()} (a URL must name a file)", item
                )
        else:
            corpus_paths(item, who=who)
    return _url_documents(items, who, dict(text_field=text_field, split_on=split_on, errors=errors, progress=progress))


def _url_documents(items: list, who: str, options: dict) -> Iterator[str]:
    for item in items:
        if is_url(item):
            yield from file_documents(item, **options)
        else:
            yield from iter_documents(corpus_paths(item, who=who), **options)


def iterator_documents(
    texts: Iterable[str], *, who: str = "train_from_iterator", progress: bool | Progress | None = None
) -> Iterator[str]:
    """The documents of ``train_from_iterator(texts)``: an iterable of str, each item checked."""
    if isinstance(texts, (str, bytes, bytearray, os.PathLike)):
        raise TypeError(
            f"{who} takes an iterable of str (texts), not a single {type(texts).__name__}; "
            f"wrap one text in a list ([text]), or pass a path to train(corpus) to read files"
        )
    try:
        it = iter(texts)
    except TypeError:
        raise TypeError(f"{who} takes an iterable of str, not {type(texts).__name__}") from None
    return _generate(it, None, progress, {})


class Texts:
    """An iterable of str marked as texts: what a family's ``train_from_iterator``
    hands its ``train`` (see :func:`corpus_documents`). Not a corpus of files."""

    __slots__ = ("texts",)

    def __init__(self, texts: Iterable[str]) -> None:
        self.texts = texts


def corpus_documents(
    corpus: object,
    *,
    who: str = "train",
    text_field: str = "text",
    split_on: str | None = None,
    errors: str = "strict",
    progress: bool | Progress | None = None,
) -> Iterator[str]:
    """The one corpus rule: :class:`Texts` -> :func:`iterator_documents`; anything
    else is ``train(corpus)``'s paths -> :func:`train_documents`."""
    if isinstance(corpus, Texts):
        return iterator_documents(corpus.texts, who=who.replace("train", "train_from_iterator", 1), progress=progress)
    return train_documents(corpus, who=who, text_field=text_field, split_on=split_on, errors=errors, progress=progress)


def _generate(
    source: object, paths: list[Path] | None, progress: bool | Progress | None, options: dict
) -> Iterator[str]:
    """The lazy half of :func:`iter_documents`."""
    own_bar = None
    bar: Progress | None
    if progress is True:
        total = corpus_bytes(source if paths is not None else Texts(cast(Iterable[str], source)))
        bar = own_bar = progress_bar(total=total, desc="reading corpus", unit="B")
    else:
        bar = None if progress is False else progress
    try:
        if paths is None:
            yield from _text_documents(cast(Iterable[str], source), bar)
            return
        for path in paths:
            yield from file_documents(path, progress=bar, **options)
    finally:
        if own_bar is not None:
            own_bar.close()
