"""The checksum of tokenforge's own files: one rule, used by every writer and reader.

A file in one of tokenforge's own formats carries the SHA-256 of its content,
and every reader checks it, so a file changed after it was written -- one digit
of a merge, one byte, one line -- is refused with :class:`ChecksumError` (a
:class:`FormatError`) instead of loading as a different tokenizer. Foreign
formats (``.tiktoken``, Hugging Face ``tokenizer.json``, seed 003 pickles, the
seed's LZ78 TSVs and tokenizer.json, ``.mxgram``) have no place for one and are
only validated structurally.

Which files (:data:`SEALED_SINCE`: format name -> first version with a checksum):
tokenforge-bpe JSON, tokenforge-growing JSON, tokenforge-mixedgram JSON, the
LZ78 TSV with the ``# tokenforge lz78 vN`` header, and the shard index
(tokenforge-shards). Older versions carry no checksum and still load; a
checksum in a version that had none is refused (the version was altered).

The rule:

- JSON: the top-level key ``"checksum": "sha256:<64 lower-case hex>"`` (written
  last). The content is the parsed document without that key, serialised
  canonically: ``json.dumps(value, sort_keys=True, ensure_ascii=True,
  separators=(",", ":"), allow_nan=False)`` encoded as ASCII. Whitespace, key
  order and string escapes may change (a reformatted file still verifies);
  no value may. NaN and infinities cannot be written canonically, so they are
  refused in every file (also in versions without a checksum: the writer could
  not write them back).
- TSV: the line ``# checksum=sha256:<hex>`` (written as line 2). The content is
  every other line of the file (after a UTF-8 byte order mark, if any), each
  without one trailing ``\\r``, each followed by ``\\n``, as UTF-8. So a file
  that went through a CRLF conversion still verifies; any other change does not.

A file edited by hand on purpose: :func:`reseal` (or ``tokenforge reseal
FILE``, also spelled ``python -m tokenforge.formats.checksum reseal FILE``)
records the checksum of its new content; it changes nothing else, and the next load checks the file's
structure as usual. It is a separate, explicit step so that a checksum that
is right for altered content never comes about by accident: writers compute the
checksum of the exact text they write (never carry one over from a file they
read), and readers hand no checksum to the in-memory data.

Not handled: deliberate forgery (anyone can recompute a SHA-256; this catches
accidents -- bit rot, truncated copies, edits, tools that rewrite numbers);
the ``.vocab.txt`` view beside BPE JSON (never read back).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Any

from ..errors import ChecksumError, FormatError
from ._jsonutil import JsonDoc, _offset_of
from .atomic import atomic_write

__all__ = [
    "SEALED_SINCE",
    "KEY",
    "json_checksum",
    "seal_json_text",
    "check_json",
    "tsv_checksum",
    "seal_tsv_lines",
    "check_tsv",
    "reseal",
]

#: format name -> the first version whose files carry a checksum
SEALED_SINCE = {
    "tokenforge-bpe": 2,
    "tokenforge-growing": 2,
    "tokenforge-mixedgram": 2,
    "tokenforge-shards": 2,
    "tokenforge lz78": 2,
    "tokenforge-pipeline": 1,
}
KEY = "checksum"
_PREFIX = "sha256:"
_VALUE = re.compile(r"sha256:[0-9a-f]{64}\Z")
_RESEAL = "tokenforge reseal FILE"


def _how_to_accept(path: str | os.PathLike[str]) -> str:
    if path is not None and "://" in str(path):  # a remote (sync): only its publisher can reseal it
        return f"if it was edited on purpose, its publisher must record its new content with `{_RESEAL}`"
    where = _RESEAL if path is None else _RESEAL.replace("FILE", str(path))
    return f"if you edited it on purpose, record its new content with `{where}` and load it again"


# --------------------------------------------------------------------- JSON
def _canonical(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode("ascii")


def json_checksum(value: dict) -> str:
    """``"sha256:<hex>"`` of a parsed document, its own checksum key left out."""
    if KEY in value:
        value = {k: v for k, v in value.items() if k != KEY}
    return _PREFIX + hashlib.sha256(_canonical(value)).hexdigest()


def seal_json_text(text: str, indent: str = "  ") -> str:
    """``text`` (one JSON object ending in ``}``) with its checksum added as the last key.

    The checksum is computed from ``text`` parsed back, i.e. from exactly what
    a reader will see; a document that already has a checksum key is a bug in
    the writer (it would carry an old checksum over)."""
    value = json.loads(text)
    if not isinstance(value, dict) or KEY in value:
        raise ValueError("seal_json_text needs a JSON object without a checksum key")
    refuse_lone_surrogates(text)
    body = text.rstrip()
    if not body.endswith("}"):
        raise ValueError("seal_json_text needs text ending in '}'")
    body = body[:-1].rstrip()
    comma = "" if body.endswith("{") else ","
    return f'{body}{comma}\n{indent}"{KEY}": "{json_checksum(value)}"\n}}\n'


def refuse_lone_surrogates(text: str) -> None:
    """Refuse to write JSON text holding a lone surrogate escape: the readers
    refuse it (no UTF-8 file can hold the character), so the file could never be
    loaded. Raised before anything is written."""
    if "\\ud" in text or "\\uD" in text:
        from ._jsonutil import _line_col, _lone_surrogate_at

        lone = _lone_surrogate_at(text)
        if lone is not None:
            line, col = _line_col(text, lone[0])
            raise FormatError(
                f"cannot save a string holding a lone surrogate ({lone[1]}, at line {line}, column {col} of what would "
                "be written): no UTF-8 file can hold it and the readers refuse it; replace it (e.g. "
                "s.encode('utf-8', 'replace').decode()) before saving"
            )


def _non_finite_path(value: object) -> list | None:
    """The JSON path of the first NaN/infinity in ``value``, or None (iterative: no depth limit)."""
    stack: list[tuple[list, Any]] = [([], value)]
    while stack:
        where, v = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            return where
        if isinstance(v, dict):
            stack.extend((where + [k], x) for k, x in reversed(list(v.items())))
        elif isinstance(v, list):
            stack.extend((where + [i], x) for i, x in reversed(list(enumerate(v))))
    return None


def canonical_of_parts(value: dict, canonical: dict[str, bytes]) -> bytes:
    """The canonical text of ``value`` (checksum key left out), taking the
    canonical text of some members as given (``canonical``: key -> bytes, e.g.
    made by the engine from the file's integer arrays, whose canonical text is
    their digits): the same bytes ``json.dumps`` with ``sort_keys`` makes, so
    the same checksum, without a Python object per entry. ValueError for a
    NaN or an infinity, as :func:`json_checksum`."""
    parts = [
        _canonical(k) + b":" + (canonical[k] if k in canonical else _canonical(value[k]))
        for k in sorted(value)
        if k != KEY
    ]
    return b"{" + b",".join(parts) + b"}"


def check_json(doc: JsonDoc, name: str, version: int, canonical: bytes | None = None) -> None:
    """Check a parsed document of our format ``name`` at ``version`` (after its
    format and version were read): no NaN/infinity anywhere; the checksum key
    present and right from :data:`SEALED_SINCE` on, absent before.
    ``canonical``: the content's canonical text when the caller made it
    (:func:`canonical_of_parts`)."""
    value = doc.value
    try:
        if canonical is None:
            canonical = _canonical({k: v for k, v in value.items() if k != KEY})
    except ValueError:  # NaN or an infinity (1e999 parses as one)
        where = _non_finite_path(value) or []
        raise doc.error(
            where, "NaN and infinities are not JSON numbers; tokenforge can neither check nor write this value back"
        ) from None
    except RecursionError:
        raise doc.error([], "JSON nested too deeply") from None
    sealed = version >= SEALED_SINCE[name]
    if KEY not in value:
        if sealed:
            raise doc.error(
                [KEY], f"required key is missing: a version {version} {name} file carries a checksum of its content"
            )
        return
    if not sealed:
        raise doc.error(
            [KEY],
            f"a version {version} {name} file has no checksum (checksums start with version {SEALED_SINCE[name]}); "
            "its version number was changed after it was written",
        )
    stored = value[KEY]
    if not isinstance(stored, str) or not _VALUE.match(stored):
        raise doc.error([KEY], f'expected "sha256:" and 64 lower-case hex digits, found {json.dumps(stored)[:80]}')
    actual = _PREFIX + hashlib.sha256(canonical).hexdigest()
    if stored != actual:
        raise doc.error(
            [KEY],
            f"the file was altered after it was written: its content does not match its checksum "
            f"(recorded {stored[:19]}..., content {actual[:19]}...); {_how_to_accept(doc.path)}",
            cls=ChecksumError,
        )


# --------------------------------------------------------------------- TSV
def _setting_key(line: str) -> str | None:
    """The key of a ``# key=value`` line (the LZ78 header's syntax), else None."""
    if not line.startswith("#"):
        return None
    body = line[1:].strip()
    return body.split("=", 1)[0].strip() if "=" in body else None


def tsv_checksum(lines: list[str], skip: int | None = None) -> str:
    """``"sha256:<hex>"`` of ``lines`` (as split on ``\\n``), line ``skip`` (0-based) left out."""
    h = hashlib.sha256()
    for i, line in enumerate(lines):
        if i != skip:
            h.update((line[:-1] if line.endswith("\r") else line).encode("utf-8", "surrogatepass") + b"\n")
    return _PREFIX + h.hexdigest()


def seal_tsv_lines(lines: list[str]) -> list[str]:
    """``lines`` with ``# checksum=...`` inserted as line 2 (after the version line)."""
    if not lines or not lines[0].startswith("# tokenforge "):
        raise ValueError(
            "seal_tsv_lines needs lines that start with a tokenforge header (seed-style files have no checksum)"
        )
    if _header_checksum_lines(lines):
        raise ValueError("seal_tsv_lines got lines that already hold a checksum")
    return [lines[0], f"# {KEY}={tsv_checksum(lines)}", *lines[1:]]


def _header_checksum_lines(lines: list[str]) -> list[int]:
    """Indices of ``# checksum=`` lines in the leading block of ``#`` lines."""
    found = []
    for i, line in enumerate(lines):
        if not line.startswith("#"):
            break
        if _setting_key(line) == KEY:
            found.append(i)
    return found


def check_tsv(lines: list[str], path: str | os.PathLike[str], name: str, version: int | None) -> None:
    """Check the lines of a TSV file of our format ``name``; ``version`` None
    means the file has no tokenforge header line (a seed file), which must then
    not hold a checksum line either (its header line was altered)."""
    found = _header_checksum_lines(lines)
    if version is None:
        if found:
            raise FormatError(
                f"a tokenforge checksum line, but line 1 is not a tokenforge header "
                f"(it was altered, or the file was edited; {_how_to_accept(path)})",
                path=path,
                line=found[0] + 1,
            )
        return
    sealed = version >= SEALED_SINCE[name]
    if not sealed:
        if found:
            raise FormatError(
                f"a version {version} file has no checksum (checksums start with version {SEALED_SINCE[name]}); "
                "its version line was changed after it was written",
                path=path,
                line=found[0] + 1,
            )
        return
    if not found:
        raise FormatError(
            f"the header has no '# {KEY}=' line; a version {version} file carries a checksum of its content",
            path=path,
            line=1,
        )
    if len(found) > 1:
        raise FormatError(f"a second '# {KEY}=' line (the first is line {found[0] + 1})", path=path, line=found[1] + 1)
    i = found[0]
    stored = lines[i][1:].strip().split("=", 1)[1].strip()
    if not _VALUE.match(stored):
        raise FormatError(
            f"expected '# {KEY}=sha256:' and 64 lower-case hex digits, found {stored[:80]!r}", path=path, line=i + 1
        )
    actual = tsv_checksum(lines, i)
    if stored != actual:
        raise ChecksumError(
            f"the file was altered after it was written: its content does not match its checksum "
            f"(recorded {stored[:19]}..., content {actual[:19]}...); {_how_to_accept(path)}",
            path=path,
            line=i + 1,
        )


# --------------------------------------------------------------------- reseal
_TSV_HEADER = re.compile(r"# (tokenforge [a-z0-9]+) v([0-9]+)\r?\Z")


def reseal(path: str | os.PathLike[str]) -> str:
    """Record the checksum of ``path``'s current content (after a deliberate
    edit); returns the new checksum. Nothing else in the file changes. The file
    must be one of tokenforge's own formats at a version that has checksums."""
    path = Path(path)
    raw = path.read_bytes()
    bom = "\ufeff" if raw.startswith(b"\xef\xbb\xbf") else ""
    try:
        text = raw.decode("utf-8")[len(bom) :]
    except UnicodeDecodeError as e:
        raise FormatError(f"not UTF-8 text ({e.reason}); not a tokenforge file", path=path, offset=e.start) from None
    first = text.split("\n", 1)[0]
    m = _TSV_HEADER.match(first)
    if m:
        name, version = m.group(1), int(m.group(2))
        _require_sealed(path, name, version)
        lines = text.split("\n")
        last_empty = lines[-1] == ""
        if last_empty:
            lines.pop()
        found = _header_checksum_lines(lines)
        if len(found) > 1:
            raise FormatError(f"more than one '# {KEY}=' line; keep one", path=path, line=found[1] + 1)
        if found:
            del lines[found[0]]
        lines = seal_tsv_lines(lines)
        new = lines[1].split("=", 1)[1]
        atomic_write(path, bom + "\n".join(lines) + ("\n" if last_empty else ""))
        return new
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise FormatError("neither a tokenforge TSV header nor valid JSON; not a tokenforge file", path=path) from None
    if not isinstance(value, dict) or value.get("format") not in SEALED_SINCE:
        raise FormatError(
            f"not one of tokenforge's own formats ({', '.join(SEALED_SINCE)}); foreign formats have no checksum",
            path=path,
        )
    json_version = value.get("version")
    if not isinstance(json_version, int) or isinstance(json_version, bool):
        raise FormatError(f"expected an integer version, found {json.dumps(json_version)[:40]}", path=path)
    _require_sealed(path, value["format"], json_version)
    new = json_checksum(value)
    offset = _offset_of(text, [KEY])
    if offset is not None:
        _, end = json.JSONDecoder().raw_decode(text, offset)
        text = text[:offset] + json.dumps(new) + text[end:]
    else:
        text = seal_json_text(text)
    atomic_write(path, bom + text)
    return new


def _require_sealed(path: str | os.PathLike[str], name: str, version: int) -> None:
    if name not in SEALED_SINCE:
        raise FormatError(f"{name!r} is not one of tokenforge's formats with a checksum", path=path)
    if version < SEALED_SINCE[name]:
        raise FormatError(
            f"a version {version} {name} file has no checksum (checksums start with version {SEALED_SINCE[name]}); "
            "it loads as it is, and saving it writes the current version with a checksum",
            path=path,
        )


def _main(argv: list[str]) -> None:
    """``python -m tokenforge.formats.checksum reseal FILE...`` is ``tokenforge reseal FILE...``:
    the command itself runs, so its errors and exit statuses are every command's
    (:func:`tokenforge.cli.main.run_command`). It is reached by name, not imported: the CLI
    imports the formats, so the formats do not import the CLI."""
    if not argv or argv[0] != "reseal":
        print(
            "usage: python -m tokenforge.formats.checksum reseal FILE [FILE...] (= tokenforge reseal FILE...)",
            file=sys.stderr,
        )
        sys.exit(2)  # tokenforge.cli.main.EXIT_USAGE
    import runpy

    sys.argv = ["tokenforge", *argv]
    runpy.run_module("tokenforge", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    _main(sys.argv[1:])
