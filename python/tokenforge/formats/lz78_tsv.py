"""LZ78 dictionary files: the seed's two TSV formats, strict readers, atomic writers.

Two formats (byte-exact description in docs/formats.md, "LZ78 TSV"):

- **lz78** ``code, parent_code, char, pattern`` and, in our files, an optional
  fifth column ``output`` (1/0; absent = 1).
- **compressed** (a Patricia trie) ``node_idx, edge_label, parent_idx,
  output_code, pattern``; an empty ``output_code`` or ``-1`` means no output.

Files we write start with ``# tokenforge lz78 v2``, then ``# checksum=sha256:...``
(the content's checksum, from version 2 on; see :mod:`tokenforge.formats.checksum`),
then ``# key=value`` lines
(``format``, ``structure``, ``strategy``, ``N``, ``chunking``, ...), then a
column-name row, then the rows. In them ``char``, ``pattern`` and
``edge_label`` use backslash escapes (``\\t`` ``\\n`` ``\\r`` ``\\\\``).
Files without that header are read as the seed writes them: no escapes,
``#`` lines and blank lines skipped, codes remapped to 1..N in sorted order.

Files without that header are also what ``style="seed"`` writes: exactly the
seed's columns, no header, no escapes (so a tab, LF or CR in a pattern is
refused, naming the code). A file without that header whose column-name row is
one only we write (``code, parent_code, char, pattern, output``, or the
compressed five) is ours with its header removed (``grep -v '^#'`` drops the
checksum with it): refused, never read as a seed file with its escapes taken
literally. In every file a parent's row precedes its
children's. CRLF files are read (one CR before each LF is the line break's).

Every reader is strict: a wrong column count, a non-integer code, a duplicate
code, a missing parent, a tree entry whose pattern is not its parent's
pattern plus its char, a bad escape, a line break inside a header value, or
an unknown version raises :class:`~tokenforge.errors.FormatError` naming the
file and the line, and nothing is returned half-built. Content that does not
match the checksum raises :class:`~tokenforge.errors.ChecksumError`; version 1
files (no checksum) are read as before.

Not handled: the seed's files have no header and so no checksum (validated
structurally only); a checksum catches accidental changes, not forgery; a
seed-style file cannot hold a tab, LF or CR in a pattern, nor
(lz78 format) mark prefix-only entries; an LF file whose fields end in CR
keeps the CR as data (a seed file has no escapes), a CRLF file loses one CR
per line to the line break.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ..errors import FormatError, TokenforgeError, VersionError
from . import checksum
from ._jsonutil import parse_json
from .atomic import atomic_write
from .patterns import NAMED_PATTERNS

__all__ = [
    "LZ78Data",
    "read_lz78_tsv",
    "lz78_tsv_from_bytes",
    "write_lz78_tsv",
    "lz78_tsv_text",
    "sniff_lz78_tsv",
    "parents_first",
    "drop_unwritable",
    "SeedStyleError",
    "HEADER",
    "VERSION",
    "LEGACY_SHARDS_TOKENIZER",
]

VERSION = 2  # 2: a checksum of the content (formats/checksum.py)
_NAME = "tokenforge lz78"  # the checksum rule's name for this format
HEADER = "# tokenforge lz78 v"
LZ78_COLUMNS = ("code", "parent_code", "char", "pattern")
COMPRESSED_COLUMNS = ("node_idx", "edge_label", "parent_idx", "output_code", "pattern")
STRUCTURES = ("tree", "flat", "compressed")
#: the tokenizer of every shard set the old ``tokenforge lz78 pretokenize`` wrote
#: (its index, ``tokenforge-token-shards`` v1, did not say; the shard reader fills it in)
LEGACY_SHARDS_TOKENIZER = {"class": "LZ78Tokenizer", "family": "lz78"}


@dataclass
class LZ78Data:
    """A dictionary as stored.

    ``structure`` "tree" / "flat": ``nodes[k]`` is code k+1 as
    ``(parent_code, char, pattern, output)``, output entries first (so output
    ids are 1..N). "compressed": ``nodes[k]`` is Patricia node k+1 as
    ``(parent_idx, edge_label, output_id or -1, pattern)``, output ids 1..N.
    ``settings`` holds the header's key=value pairs (decoded).
    """

    structure: str
    nodes: list
    settings: dict = field(default_factory=dict)

    @property
    def num_outputs(self) -> int:
        if self.structure == "compressed":
            return sum(1 for n in self.nodes if n[2] > 0)
        return sum(1 for n in self.nodes if n[3])

    def output_patterns(self) -> list[str]:
        """Pattern of id k+1 at position k."""
        if self.structure == "compressed":
            outs = sorted((n[2], n[3]) for n in self.nodes if n[2] > 0)
            return [p for _, p in outs]
        return [n[2] for n in self.nodes if n[3]]


# ---------------------------------------------------------------------------
# escapes
# ---------------------------------------------------------------------------
_ESC = {"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}


def escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def unescape(s: str, what: str, path: str | os.PathLike[str], line: int) -> str:
    if "\\" not in s:
        return s
    out = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 >= len(s):
            raise FormatError(
                f"bad escape in {what}: a lone backslash at the end (write \\\\ for a backslash)", path=path, line=line
            )
        e = s[i + 1]
        if e not in _ESC:
            raise FormatError(f"bad escape \\{e} in {what}; the escapes are \\t \\n \\r \\\\", path=path, line=line)
        out.append(_ESC[e])
        i += 2
    return "".join(out)


# ---------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------
def _int(s: str, what: str, path: str | os.PathLike[str], line: int, minimum: int) -> int:
    if len(s) > 20:  # no code has more digits; never int() a number of any length
        raise FormatError(f"{what} has {len(s)} characters, too many for a code", path=path, line=line)
    try:
        v = int(s, 10)
    except ValueError:
        raise FormatError(f"{what} {s!r} is not an integer", path=path, line=line) from None
    if s.strip() != s or (s.startswith("+")):
        raise FormatError(f"{what} {s!r} is not a plain integer", path=path, line=line)
    if v < minimum:
        raise FormatError(f"{what} {v} must be at least {minimum}", path=path, line=line)
    return v


def _lines(path: Path) -> list[str]:
    try:
        raw = path.read_bytes()
    except IsADirectoryError:
        raise FormatError("is a directory, not a TSV file", path=path) from None
    return _lines_of(raw, path)


def _lines_of(raw: bytes, path: str | os.PathLike[str]) -> list[str]:
    """The lines of a TSV file's bytes (``path`` names them in errors)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise FormatError(f"invalid UTF-8 at byte offset {e.start}", path=path, line=line) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    crlf = text.count("\r\n")
    if crlf and crlf == text.count("\n"):
        # A CRLF file (every line break is CR LF): one CR per line is the line
        # break's, not the last field's. (In an LF file a CR stays data: the
        # seed's files have no escapes.)
        text = text.replace("\r\n", "\n")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


#: a comment line of our header block (a setting we write, or a checksum): in a
#: file without our first line it means that line was damaged, not a seed file
_OUR_SETTING = re.compile(
    r"#.{0,3}(?:checksum|format|structure|strategy|N|entries|chunking|pattern|params|specials|trainer|training)\s*="
    r"|.*sha256:[0-9a-f]{16}"
)


def _parse_header(lines: list[str], path: str | os.PathLike[str]) -> tuple[dict | None, int]:
    """(settings or None for a seed file, index of the first line after the header block)."""
    if not lines or not lines[0].startswith("# tokenforge"):
        for i, line in enumerate(lines):  # every `#` line: a seed reader skips them wherever they stand
            if line.startswith("#") and _OUR_SETTING.match(line):
                # read as a seed file it would load silently as another dictionary
                # (no escapes, no checksum): refuse instead
                raise FormatError(
                    f"this looks like a tokenforge LZ78 file whose first line ('{HEADER}{VERSION}') is missing or "
                    f"damaged (line {i + 1} is one of our header lines); the file was altered",
                    path=path,
                    line=i + 1,
                )
        return None, 0
    first = lines[0].rstrip("\r")
    if not first.startswith(HEADER):
        raise FormatError(f"not an LZ78 dictionary file: the header says {first[2:]!r}", path=path, line=1)
    ver = first[len(HEADER) :]
    if not ver.isdigit():
        raise FormatError(f"bad header {first!r}; expected '{HEADER}{VERSION}'", path=path, line=1)
    if len(ver) > 6 or not 1 <= int(ver) <= VERSION:  # (a longer number is no version; never int() it)
        raise VersionError(
            f"LZ78 dictionary format version {ver if len(ver) <= 20 else ver[:20] + '...'} is not supported "
            f"(this tokenforge reads versions 1..{VERSION}); "
            "upgrade tokenforge",
            path=path,
            line=1,
        )
    settings: dict = {}
    i = 1
    while i < len(lines) and lines[i].startswith("#"):
        body = lines[i][1:].strip()
        if "=" in body:
            k, v = body.split("=", 1)
            k = k.strip()
            if not k.isidentifier():
                raise FormatError(f"bad setting name {k!r}", path=path, line=i + 1)
            if k == "pattern" and v.strip() not in NAMED_PATTERNS:
                # chunking must split as at training; an unknown name would split differently
                raise FormatError(
                    f"unknown split pattern {v.strip()!r}; expected one of {', '.join(NAMED_PATTERNS)}",
                    path=path,
                    line=i + 1,
                )
            if "\r" in v.strip():  # the writer could not write it back
                raise FormatError(f"setting {k} holds a carriage return (a line break)", path=path, line=i + 1)
            settings[k] = v.strip()
        i += 1
    return settings, i


_JSON_KEYS = ("specials", "params", "training")


def _setting_line(lines: list[str] | None, key: str) -> int | None:
    """1-based line of ``# key = ...`` in the header (the last one wins, as in the settings)."""
    found = None
    for i, line in enumerate(lines or ()):
        if not line.startswith("#"):
            break
        body = line[1:].strip()
        if "=" in body and body.split("=", 1)[0].strip() == key:
            found = i + 1
    return found


def _decode_settings(raw: dict, path: str | os.PathLike[str], lines: list[str] | None = None) -> dict:
    s = dict(raw)
    for k in _JSON_KEYS:
        if k in s:
            s[k] = parse_json(s[k], path, f"the JSON value of setting {k}", first_line=_setting_line(lines, k) or 1)
    if "specials" in s and not (
        isinstance(s["specials"], list) and all(isinstance(x, str) and x for x in s["specials"])
    ):
        raise FormatError(
            "setting specials must be a JSON list of non-empty strings",
            path=path,
            line=_setting_line(lines, "specials"),
        )
    if "chunking" in s:
        if s["chunking"] not in ("0", "1"):
            raise FormatError(f"setting chunking must be 0 or 1, not {s['chunking']!r}", path=path)
        s["chunking"] = s["chunking"] == "1"
    if "N" in s:
        if len(s["N"]) > 20:
            raise FormatError(f"setting N has {len(s['N'])} characters, too many for a count", path=path)
        try:
            s["N"] = int(s["N"])
        except ValueError:
            raise FormatError(f"setting N must be an integer, not {s['N']!r}", path=path) from None
    return s


def read_lz78_tsv(path: str | os.PathLike[str], tsv_format: str | None = None, *, strict: bool = True) -> LZ78Data:
    """Read an LZ78 dictionary file of either format.

    ``tsv_format`` ("lz78" or "compressed") says what the caller expects; None
    takes the header's word (a seed file without header is then told apart by
    its column count). ``strict=False`` reads a seed file with the seed
    loader's leniency: a parent that does not exist becomes the root, and
    patterns are not checked against parent + char (they are what encoding
    matches). Our own files are always read strictly.
    """
    path = Path(path)
    if tsv_format not in (None, "lz78", "compressed"):
        raise FormatError(f"unknown tsv_format {tsv_format!r}; expected 'lz78' or 'compressed'", path=path)
    return _read_lines(_lines(path), path, tsv_format, strict)


def lz78_tsv_from_bytes(
    raw: bytes, origin: str | os.PathLike[str], tsv_format: str | None = None, *, strict: bool = True
) -> LZ78Data:
    """:func:`read_lz78_tsv` of a file's bytes in memory (e.g. :func:`lz78_tsv_text`
    encoded); ``origin`` names them in errors."""
    if tsv_format not in (None, "lz78", "compressed"):
        raise FormatError(f"unknown tsv_format {tsv_format!r}; expected 'lz78' or 'compressed'", path=origin)
    return _read_lines(_lines_of(raw, origin), origin, tsv_format, strict)


def _read_lines(lines: list[str], path: str | os.PathLike[str], tsv_format: str | None, strict: bool) -> LZ78Data:
    raw_settings, start = _parse_header(lines, path)
    ours = raw_settings is not None
    settings = _decode_settings(raw_settings, path, lines) if raw_settings is not None else {}
    fmt = settings.get("format") if ours else None
    if ours and fmt is None:
        fmt = "lz78"
    if fmt is not None and fmt not in ("lz78", "compressed"):
        raise FormatError(f"unknown format {fmt!r} in the header", path=path, line=1)
    if not ours:
        _refuse_ours_without_header(lines, path)
        fmt = tsv_format or _guess_seed_format(lines, path)
    if tsv_format is not None and fmt != tsv_format:
        raise FormatError(
            f"this is a {fmt!r}-format file, but tsv_format={tsv_format!r} was given; pass tsv_format={fmt!r}",
            path=path,
        )
    if fmt == "compressed":
        data = _read_compressed(lines, start, path, ours, settings)
    else:
        data = _read_lz78(lines, start, path, ours, settings, strict or ours)
    if not ours and not data.nodes:  # (it would load as an empty dictionary that cannot be saved)
        raise FormatError("no dictionary entries: an LZ78 file without our header needs at least one row", path=path)
    n = settings.get("N")
    if n is not None and n != data.num_outputs:
        raise FormatError(f"the header says N={n} but the file has {data.num_outputs} output entries", path=path)
    if ours and not data.nodes:  # training never makes an empty dictionary: this file was cut short
        raise FormatError("the file holds no dictionary entries (truncated?)", path=path, line=len(lines))
    entries = settings.get("entries")
    if entries is not None and entries != str(len(data.nodes)):
        # (a version 1 file has no checksum: this is what tells it was cut short)
        raise FormatError(
            f"the header says entries={entries[:20]} but the file has {len(data.nodes)} rows (truncated?)", path=path
        )
    version = int(lines[0].rstrip("\r")[len(HEADER) :]) if ours else None
    checksum.check_tsv(lines, path, _NAME, version)  # after the checks that say what is wrong where
    settings.pop(checksum.KEY, None)  # never carried over: a writer computes its own
    return data


def _data_rows(lines: list[str], start: int, ours: bool, columns: tuple) -> list[tuple[int, list[str]]]:
    """(1-based line number, fields) of each data row."""
    rows: list[tuple[int, list[str]]] = []
    for i in range(start, len(lines)):
        line = lines[i]
        if line.endswith("\r") and ours:
            line = line[:-1]
        if not line or line.startswith("#"):
            continue
        fields = line.split("\t")
        if tuple(fields[: len(columns)]) == columns and not rows:
            continue  # the column-name row
        rows.append((i + 1, fields))
    return rows


def _refuse_ours_without_header(lines: list[str], path: str | os.PathLike[str]) -> None:
    """A file without our header whose column-name row is one we write (the lz78
    row with ``output``, or the compressed row: neither the seed nor the seed
    style writes one) is ours with its header removed, e.g. by ``grep -v '^#'``,
    which drops the checksum too. Read as a seed file its escapes would be
    taken literally and its settings dropped, so it is refused."""
    ours = {"\t".join(LZ78_COLUMNS + ("output",)), "\t".join(COMPRESSED_COLUMNS)}
    for i, line in enumerate(lines):
        if not line or line.startswith("#"):
            continue
        if line.rstrip("\r") in ours:
            raise FormatError(
                f"this file has tokenforge's column-name row but not its header lines ('{HEADER}{VERSION}' and "
                "its checksum, perhaps stripped with the other '#' lines): it is a damaged tokenforge LZ78 file, "
                "not a seed file; restore its header or write it again",
                path=path,
                line=i + 1,
            )
        return


def _guess_seed_format(lines: list[str], path: str | os.PathLike[str]) -> str:
    for line in lines:
        if not line or line.startswith("#"):
            continue
        f = line.split("\t")
        if tuple(f[:5]) == COMPRESSED_COLUMNS:
            return "compressed"
        if tuple(f[:4]) == LZ78_COLUMNS:
            return "lz78"
        return "compressed" if len(f) == 5 else "lz78"
    return "lz78"


def _read_lz78(
    lines: list[str], start: int, path: str | os.PathLike[str], ours: bool, settings: dict, strict: bool
) -> LZ78Data:
    structure = settings.get("structure", "tree") if ours else "tree"
    if structure not in ("tree", "flat"):
        raise FormatError(f"structure {structure!r} is not valid for the lz78 format (tree or flat)", path=path)
    flat = structure == "flat"
    ncols = (4, 5) if ours else (4,)
    rows = []  # (line, code, parent, char, pattern, output)
    seen: dict[int, int] = {}
    for lineno, f in _data_rows(lines, start, ours, LZ78_COLUMNS):
        if len(f) not in ncols:
            want = "4 or 5" if ours else "4"
            raise FormatError(
                f"expected {want} tab-separated columns (code, parent_code, char, pattern{', output' if ours else ''}), found {len(f)}",
                path=path,
                line=lineno,
            )
        code = _int(f[0], "code", path, lineno, 1)
        parent = _int(f[1], "parent_code", path, lineno, 0)
        ch = unescape(f[2], "char", path, lineno) if ours else f[2]
        pattern = unescape(f[3], "pattern", path, lineno) if ours else f[3]
        output = True
        if len(f) == 5:
            if f[4] not in ("0", "1"):
                raise FormatError(f"output must be 1 or 0, not {f[4]!r}", path=path, line=lineno)
            output = f[4] == "1"
        if code in seen:
            raise FormatError(f"duplicate code {code} (first defined on line {seen[code]})", path=path, line=lineno)
        seen[code] = lineno
        if not pattern:
            raise FormatError("empty pattern", path=path, line=lineno)
        if not flat and len(ch) != 1 and strict:
            raise FormatError(f"char must be exactly one character, not {ch!r}", path=path, line=lineno)
        rows.append((lineno, code, parent, ch, pattern, output))
    if not ours and rows and all(r[2] == 0 for r in rows) and any(len(r[4]) > 1 for r in rows):
        # Every parent the root and some pattern longer than one character: no
        # tree has that, a flat dictionary (flat_prune, written in the seed's
        # style) does.
        structure, flat = "flat", True
    by_code = {r[1]: r for r in rows}
    pattern_line: dict[str, int] = {}
    for lineno, code, parent, ch, pattern, output in rows:
        if pattern in pattern_line:
            raise FormatError(
                f"pattern {pattern!r} is already defined on line {pattern_line[pattern]}", path=path, line=lineno
            )
        pattern_line[pattern] = lineno
        if flat:
            continue
        if parent != 0 and parent not in by_code:
            if strict:
                raise FormatError(f"parent_code {parent} does not exist in this file", path=path, line=lineno)
            continue
        if strict:
            pp = by_code[parent][4] if parent else ""
            if pattern != pp + ch:
                raise FormatError(
                    f"pattern {pattern!r} is not its parent's pattern {pp!r} (code {parent}) plus its char {ch!r}",
                    path=path,
                    line=lineno,
                )
    # codes in sorted order; outputs first
    order = sorted(rows, key=lambda r: r[1])
    order = [r for r in order if r[5]] + [r for r in order if not r[5]]
    new = {r[1]: k + 1 for k, r in enumerate(order)}
    nodes = []
    for lineno, code, parent, ch, pattern, output in order:
        p = 0 if flat else new.get(parent, 0)
        nodes.append((p, ch, pattern, output))
    return LZ78Data(structure=structure, nodes=nodes, settings=settings)


def _read_compressed(
    lines: list[str], start: int, path: str | os.PathLike[str], ours: bool, settings: dict
) -> LZ78Data:
    structure = settings.get("structure", "compressed") if ours else "compressed"
    if structure != "compressed":
        raise FormatError(f"structure {structure!r} is not valid for the compressed format", path=path)
    rows = []
    seen: dict[int, int] = {}
    out_seen: dict[int, int] = {}
    for lineno, f in _data_rows(lines, start, ours, COMPRESSED_COLUMNS):
        if len(f) != 5:
            raise FormatError(
                f"expected 5 tab-separated columns (node_idx, edge_label, parent_idx, output_code, pattern), found {len(f)}",
                path=path,
                line=lineno,
            )
        idx = _int(f[0], "node_idx", path, lineno, 0)
        label = unescape(f[1], "edge_label", path, lineno) if ours else f[1]
        pattern = unescape(f[4], "pattern", path, lineno) if ours else f[4]
        if idx == 0:
            # an explicit root row: empty label and pattern, no output
            if label or pattern or f[3] not in ("", "-1"):
                raise FormatError(
                    "node 0 is the root: its edge label, pattern and output must be empty", path=path, line=lineno
                )
            if 0 in seen:
                raise FormatError(f"duplicate node_idx 0 (first defined on line {seen[0]})", path=path, line=lineno)
            seen[0] = lineno
            continue
        parent = _int(f[2], "parent_idx", path, lineno, 0)
        out = -1 if f[3] in ("", "-1") else _int(f[3], "output_code", path, lineno, 1)
        if idx in seen:
            raise FormatError(f"duplicate node_idx {idx} (first defined on line {seen[idx]})", path=path, line=lineno)
        seen[idx] = lineno
        if out > 0:
            if out in out_seen:
                raise FormatError(
                    f"duplicate output_code {out} (first used on line {out_seen[out]})", path=path, line=lineno
                )
            out_seen[out] = lineno
        if not label:
            raise FormatError("empty edge_label", path=path, line=lineno)
        rows.append((lineno, idx, label, parent, out, pattern))
    by_idx = {r[1]: r for r in rows}
    pattern_line: dict[str, int] = {}
    for lineno, idx, label, parent, out, pattern in rows:
        if parent != 0 and parent not in by_idx:
            raise FormatError(f"parent_idx {parent} does not exist in this file", path=path, line=lineno)
        pp = by_idx[parent][5] if parent else ""
        if pattern != pp + label:
            raise FormatError(
                f"pattern {pattern!r} is not its parent's pattern {pp!r} (node {parent}) plus its edge label {label!r}",
                path=path,
                line=lineno,
            )
        if pattern in pattern_line:
            raise FormatError(
                f"pattern {pattern!r} is already defined on line {pattern_line[pattern]}", path=path, line=lineno
            )
        pattern_line[pattern] = lineno
    order = sorted(rows, key=lambda r: r[1])
    new_idx = {r[1]: k + 1 for k, r in enumerate(order)}
    new_out = {o: k + 1 for k, o in enumerate(sorted(out_seen))}
    nodes = [
        (new_idx[parent] if parent else 0, label, new_out[out] if out > 0 else -1, pattern)
        for lineno, idx, label, parent, out, pattern in order
    ]
    return LZ78Data(structure="compressed", nodes=nodes, settings=settings)


# ---------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------
def _header_lines(data: LZ78Data, fmt: str) -> list[str]:
    s = dict(data.settings)
    s["format"] = fmt
    s["structure"] = data.structure
    s["N"] = data.num_outputs
    s["entries"] = len(data.nodes)
    s.pop(checksum.KEY, None)  # the writer adds the checksum of what it writes
    out = [f"{HEADER}{VERSION}"]
    first = ("format", "structure", "strategy", "N", "entries", "chunking", "pattern")
    keys = [k for k in first if k in s] + sorted(k for k in s if k not in first)
    for k in keys:
        v = s[k]
        if k in _JSON_KEYS:
            v = json.dumps(v, ensure_ascii=False, sort_keys=True)
            if not v.isascii() and any(0xD800 <= ord(c) <= 0xDFFF for c in v):
                checksum.refuse_lone_surrogates(json.dumps(s[k], ensure_ascii=True))  # readers refuse them
        elif isinstance(v, bool):
            v = "1" if v else "0"
        v = str(v)
        if "\n" in v or "\r" in v:
            raise ValueError(f"setting {k} contains a line break")
        out.append(f"# {k}={v}")
    return out


def parents_first(nodes: Sequence[Sequence[Any]]) -> list[int]:
    """0-based node indices in an order where each node's parent comes before it.

    ``nodes[k][0]`` is node k+1's parent (0 = root). Nodes keep their code
    order except that a parent listed after its child (a prefix-only node:
    output entries have the low codes) is moved to just before the first child
    that needs it. Linear: each node is placed once.
    """
    n = len(nodes)
    placed = [False] * n
    order: list[int] = []
    for k in range(n):
        chain = []
        j = k
        while 0 <= j < n and not placed[j]:
            placed[j] = True  # marked on the way up, so a cycle cannot loop
            chain.append(j)
            j = nodes[j][0] - 1
        order.extend(reversed(chain))
    return order


#: characters the seed's format cannot hold (it has no escapes)
SEED_UNWRITABLE = ("\t", "\n", "\r")


class SeedStyleError(TokenforgeError):
    """A dictionary that the seed's TSV style cannot represent faithfully."""


def _seed_check(data: LZ78Data, fmt: str) -> None:
    if fmt == "lz78" and data.structure == "tree":
        prefix_only = sum(1 for n in data.nodes if not n[3])
        if prefix_only:
            raise SeedStyleError(
                f"this dictionary has {prefix_only} prefix-only entries (smart_prune or compact_output_vocab), which "
                "the seed's four lz78 columns cannot mark; write the compressed format (tsv_format='compressed', "
                "--tsv_format compressed), whose output_code -1 marks them, or the tokenforge style"
            )
    bad = [k for k, n in enumerate(data.nodes) if any(c in n[3 if fmt == "compressed" else 2] for c in SEED_UNWRITABLE)]
    if bad:
        k = bad[0]
        pat = data.nodes[k][3 if fmt == "compressed" else 2]
        what = "node" if fmt == "compressed" else "code"
        raise SeedStyleError(
            f"{what} {k + 1} (pattern {pat!r}) and {len(bad) - 1} more contain a tab, line feed or carriage return, "
            "which the seed's TSV cannot hold (it has no escapes); write the tokenforge style (escapes), or drop "
            "those entries (unwritable='drop', --drop_unwritable: ids change, that text then uses byte fallbacks)"
        )


def drop_unwritable(data: LZ78Data) -> tuple[LZ78Data, int]:
    """``data`` without the entries whose pattern holds a tab, LF or CR (and so
    without their descendants, whose patterns extend theirs); codes renumbered
    in order, parents remapped. Returns (new data, entries dropped)."""
    pat = 3 if data.structure == "compressed" else 2
    keep = [not any(c in n[pat] for c in SEED_UNWRITABLE) for n in data.nodes]
    dropped = keep.count(False)
    if not dropped:
        return data, 0
    new: dict[int, int] = {}
    for k, ok in enumerate(keep):
        if ok:
            new[k + 1] = len(new) + 1
    if data.structure == "compressed":
        outs = sorted(n[2] for k, n in enumerate(data.nodes) if keep[k] and n[2] > 0)
        out_id = {o: i + 1 for i, o in enumerate(outs)}
        nodes = [
            (new.get(p, 0), lab, out_id[o] if o > 0 else -1, pt)
            for k, (p, lab, o, pt) in enumerate(data.nodes)
            if keep[k]
        ]
    else:
        nodes = [(new.get(p, 0), c, pt, o) for k, (p, c, pt, o) in enumerate(data.nodes) if keep[k]]
    return LZ78Data(data.structure, nodes, dict(data.settings)), dropped


def write_lz78_tsv(path: str | os.PathLike[str], data: LZ78Data, *, style: str = "tokenforge") -> None:
    """Write :func:`lz78_tsv_text` of ``data`` to ``path`` atomically."""
    atomic_write(path, lz78_tsv_text(data, style=style))


def lz78_tsv_text(data: LZ78Data, *, style: str = "tokenforge") -> str:
    """The text of ``data`` in its own format (compressed for a Patricia trie).

    ``style="tokenforge"``: our header, a column-name row, escapes and (lz78)
    the ``output`` column. ``style="seed"``: exactly the seed's columns, no
    header, no column-name row, no escapes; refused with
    :class:`SeedStyleError` (naming the code) when a pattern holds a tab, LF
    or CR, or when a tree in the lz78 format has prefix-only entries. In both
    styles every parent's row comes before its children's; codes are the
    dictionary's (output entries 1..N), so a reader that renumbers codes in
    sorted order keeps them.
    """
    if style not in ("tokenforge", "seed"):
        raise TokenforgeError(f"unknown TSV style {style!r}; expected 'tokenforge' or 'seed'")
    seed = style == "seed"
    order = parents_first(data.nodes)
    if data.structure == "compressed":
        if seed:
            _seed_check(data, "compressed")
            lines = []
            esc: Callable[[str], str] = str
        else:
            lines = _header_lines(data, "compressed")
            lines.append("\t".join(COMPRESSED_COLUMNS))
            esc = escape
        for k in order:
            parent, label, out, pattern = data.nodes[k]
            lines.append(f"{k + 1}\t{esc(label)}\t{parent}\t{out if out > 0 else -1}\t{esc(pattern)}")
    else:
        if seed:
            _seed_check(data, "lz78")
            lines = []
            for k in order:
                parent, ch, pattern, output = data.nodes[k]
                lines.append(f"{k + 1}\t{parent}\t{ch}\t{pattern}")
        else:
            lines = _header_lines(data, "lz78")
            lines.append("\t".join(LZ78_COLUMNS + ("output",)))
            for k in order:
                parent, ch, pattern, output = data.nodes[k]
                lines.append(f"{k + 1}\t{parent}\t{escape(ch)}\t{escape(pattern)}\t{1 if output else 0}")
    if not seed:
        lines = checksum.seal_tsv_lines(lines)
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# recognising
# ---------------------------------------------------------------------------
def sniff_lz78_tsv(path: Path, head: bytes) -> bool:
    """Our header, or a ``.tsv`` file whose first row looks like either seed format."""
    if head.startswith(HEADER.encode()):
        return True
    if not path.is_file() or path.suffix.lower() != ".tsv":
        return False
    for line in head.split(b"\n")[:-1] or head.split(b"\n"):
        if not line.strip() or line.startswith(b"#"):
            continue
        f = line.split(b"\t")
        if tuple(f[:4]) == tuple(c.encode() for c in LZ78_COLUMNS) or tuple(f[:5]) == tuple(
            c.encode() for c in COMPRESSED_COLUMNS
        ):
            return True
        try:
            if len(f) == 4:
                int(f[0]), int(f[1])
                return True
            if len(f) == 5:
                int(f[0]), int(f[2])
                return True
        except ValueError:
            return False
        return False
    return False
