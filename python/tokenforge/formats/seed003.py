"""Import and export of gpt_from_scratch's BPE files (seed 003).

Files in one directory:

* ``bpe_vocab.pkl``      a pickled ``Dict[int, bytes]`` (id -> token bytes,
                         special tokens as their UTF-8 text);
* ``bpe_merges.pkl``     a pickled ``List[Tuple[bytes, bytes]]``, in learning order;
* ``special_tokens.txt`` one special token per line;
* ``pre_tokenization_pattern.txt`` the split regex, as text (optional when
                         reading: without it the seed's GPT-2 pattern applies).

Its layout is bytes 0..255 first, then the special tokens, then the merges,
and its own pattern is GPT-2's. The reader takes the ids from the vocabulary
dict, so other layouts read back too. :func:`read_seed003` reads the three
vocabulary files; :func:`read_pattern_file` the pattern, when present.

Pickles are never given to ``pickle.load``. :func:`load_plain_pickle` first
walks the opcodes (``pickletools.genops``, which decodes without executing)
and refuses any opcode that is not plain data -- importing a global, calling,
building or extension codes -- with :class:`UnsafePickleError` naming the file,
the byte offset and what it tried to import; only then does it unpickle, with
an unpickler whose ``find_class`` and ``persistent_load`` refuse everything.

The writer pickles plain dicts, lists, tuples, bytes and ints (protocol 4), so
the seed's own code loads the files with ``pickle.load``.

Not handled: a regex ending in a line break in the pattern file (one final
line break is taken as the file's end of line, so the writer refuses such a
pattern); writing the files as one transaction (each file is atomic alone).
"""

from __future__ import annotations

import io
import pickle
import pickletools
from pathlib import Path

from ..errors import FormatError, TokenforgeError, UnsafePickleError
from .atomic import atomic_write
from .bpe_data import BPEData
from .patterns import GPT2_PATTERN, WHOLE_TEXT_PATTERN
from .tiktoken_io import mergeable_ranks

__all__ = [
    "VOCAB_FILE",
    "MERGES_FILE",
    "SPECIALS_FILE",
    "PATTERN_FILE",
    "load_plain_pickle",
    "read_seed003",
    "read_pattern_file",
    "write_seed003",
    "sniff_seed003",
]

VOCAB_FILE = "bpe_vocab.pkl"
MERGES_FILE = "bpe_merges.pkl"
SPECIALS_FILE = "special_tokens.txt"
PATTERN_FILE = "pre_tokenization_pattern.txt"

#: Opcodes that only build plain data: None/bool/int/float/str/bytes/bytearray,
#: lists, tuples, dicts, sets, frozensets, and the memo and framing machinery.
_PLAIN_OPCODES = frozenset(
    """PROTO FRAME STOP MARK POP POP_MARK DUP MEMOIZE PUT BINPUT LONG_BINPUT GET BINGET LONG_BINGET
    NONE NEWTRUE NEWFALSE INT BININT BININT1 BININT2 LONG LONG1 LONG4 FLOAT BINFLOAT
    STRING BINSTRING SHORT_BINSTRING BINBYTES SHORT_BINBYTES BINBYTES8 BYTEARRAY8
    UNICODE BINUNICODE SHORT_BINUNICODE BINUNICODE8
    EMPTY_LIST APPEND APPENDS LIST EMPTY_TUPLE TUPLE TUPLE1 TUPLE2 TUPLE3
    EMPTY_DICT DICT SETITEM SETITEMS EMPTY_SET ADDITEMS FROZENSET""".split()
)
_STRING_OPCODES = frozenset("STRING BINSTRING SHORT_BINSTRING UNICODE BINUNICODE SHORT_BINUNICODE BINUNICODE8".split())
_PLAIN_TYPES = "dict, list, tuple, set, int, bytes, str"


# ------------------------------------------------------------------ safe unpickling
class _RefusingUnpickler(pickle.Unpickler):
    """Second line of defence: an unpickler that can import and call nothing."""

    def __init__(self, file, path):
        super().__init__(file)
        self._path = path

    def find_class(self, module, name):
        raise UnsafePickleError(
            f"refused: the pickle tries to import {module}.{name}; only plain data ({_PLAIN_TYPES}) is accepted",
            path=self._path,
        )

    def persistent_load(self, pid):
        raise UnsafePickleError(
            "refused: the pickle uses a persistent id; only plain data is accepted", path=self._path
        )


def _what_it_imports(op_name: str, arg, recent_strings: list) -> str:
    if op_name in ("GLOBAL", "INST") and isinstance(arg, str):
        return " tries to import " + arg.replace(" ", ".", 1)
    if op_name == "STACK_GLOBAL" and len(recent_strings) >= 2:
        return f" tries to import {recent_strings[-2]}.{recent_strings[-1]}"
    if op_name in ("REDUCE", "NEWOBJ", "NEWOBJ_EX", "OBJ", "BUILD"):
        return " tries to call or build an object"
    if op_name.startswith("EXT"):
        return f" tries to import extension code {arg}"
    return ""


def _scan_opcodes(raw: bytes, path) -> None:
    """Refuse any opcode that is not plain data; refuse truncation and trailing bytes.

    Strings pushed on the stack (directly or from the memo) are remembered
    only to name the global a STACK_GLOBAL would import.
    """
    if not raw:
        raise FormatError("empty file; expected a pickle", path=path, offset=0)
    recent: list = []
    memo: dict = {}
    top = None  # the string the previous opcode pushed, if any
    end = 0
    try:
        for op, arg, pos in pickletools.genops(raw):
            name = op.name
            if name not in _PLAIN_OPCODES:
                raise UnsafePickleError(
                    f"refused: opcode {name}{_what_it_imports(name, arg, recent)}; "
                    f"only plain data ({_PLAIN_TYPES}) is accepted",
                    path=path,
                    offset=pos,
                )
            if name == "MEMOIZE":
                memo[len(memo)] = top
            elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
                memo[arg] = top
            elif name in ("GET", "BINGET", "LONG_BINGET") and memo.get(arg) is not None:
                recent.append(memo[arg])
            top = arg if name in _STRING_OPCODES else (top if "PUT" in name or name == "MEMOIZE" else None)
            if name in _STRING_OPCODES:
                recent.append(arg)
            end = pos + 1
    except UnsafePickleError:
        raise
    except ValueError as e:  # genops: truncated, or not a pickle at all
        raise FormatError(f"corrupt or truncated pickle: {e}", path=path, offset=end) from None
    if end != len(raw):
        raise FormatError(f"{len(raw) - end} unexpected bytes after the pickle's end", path=path, offset=end)


def load_plain_pickle(path):
    """Unpickle ``path`` if, and only if, it holds plain data; never runs its code."""
    path = Path(path)
    raw = path.read_bytes()
    _scan_opcodes(raw, path)
    buf = io.BytesIO(raw)
    try:
        value = _RefusingUnpickler(buf, path).load()
    except UnsafePickleError:
        raise
    except Exception as e:  # malformed data the scan let through (e.g. bad memo index)
        raise FormatError(f"corrupt pickle: {e}", path=path, offset=buf.tell()) from None
    if buf.tell() != len(raw):
        raise FormatError("unexpected bytes after the pickle's end", path=path, offset=buf.tell())
    return value


# ------------------------------------------------------------------ reading
def _check_vocab(vocab, path) -> dict[int, bytes]:
    if not isinstance(vocab, dict):
        raise FormatError(f"expected Dict[int, bytes], found {type(vocab).__name__}", path=path)
    out = {}
    for i, b in vocab.items():
        if not isinstance(i, int) or isinstance(i, bool) or i < 0:
            raise FormatError(f"expected Dict[int, bytes]; key {i!r} is not a non-negative int", path=path)
        if not isinstance(b, (bytes, bytearray)) or not b:
            raise FormatError(f"expected Dict[int, bytes]; id {i} maps to {type(b).__name__} {b!r:.40}", path=path)
        out[i] = bytes(b)
    return out


def _check_merges(merges, path) -> list[tuple[bytes, bytes]]:
    if not isinstance(merges, (list, tuple)):
        raise FormatError(f"expected List[Tuple[bytes, bytes]], found {type(merges).__name__}", path=path)
    out = []
    for k, m in enumerate(merges):
        ok = isinstance(m, (tuple, list)) and len(m) == 2 and all(isinstance(x, (bytes, bytearray)) and x for x in m)
        if not ok:
            raise FormatError(f"merge {k}: expected a pair of non-empty bytes, found {m!r:.60}", path=path)
        out.append((bytes(m[0]), bytes(m[1])))
    return out


def _read_specials_file(path: Path) -> list[str]:
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FormatError(f"not UTF-8 ({e.reason})", path=path, offset=e.start) from None
    specials: list[str] = []
    for n, line in enumerate(text.split("\n"), start=1):
        line = line.rstrip("\r")
        if not line:
            continue
        if line in specials:
            raise FormatError(f"special token {line!r} is listed twice", path=path, line=n)
        specials.append(line)
    return specials


def _unique_id(by_bytes: dict[bytes, list[int]], wanted: bytes, exclude, what: str, path) -> int:
    ids = [i for i in by_bytes.get(wanted, []) if i not in exclude]
    if len(ids) != 1:
        found = "is missing" if not ids else f"appears under several ids {sorted(ids)}"
        raise FormatError(f"{what} ({wanted!r}) {found} in the vocabulary", path=path)
    return ids[0]


def _assemble(vocab, merges, specials, paths) -> BPEData:
    """BPEData from the three checked inputs, cross-checking vocab against merges."""
    vocab_path, merges_path, specials_path = paths
    by_bytes: dict[bytes, list[int]] = {}
    for i, b in vocab.items():
        by_bytes.setdefault(b, []).append(i)
    special_ids = {}
    for text in specials:
        ids = by_bytes.get(text.encode("utf-8"), [])
        if len(ids) != 1:
            found = "is not" if not ids else f"is under several ids {sorted(ids)}"
            raise FormatError(f"special token {text!r} {found} in {VOCAB_FILE}", path=specials_path)
        special_ids[text] = ids[0]
    taken = set(special_ids.values())
    byte_ids = [_unique_id(by_bytes, bytes([b]), taken, f"byte 0x{b:02x}", vocab_path) for b in range(256)]
    rest = sorted(set(vocab) - set(byte_ids) - set(special_ids.values()))
    if len(rest) != len(merges):
        raise FormatError(
            f"{len(rest)} vocabulary entries are neither bytes nor special tokens, but {MERGES_FILE} has "
            f"{len(merges)} merges (missing {SPECIALS_FILE}?)",
            path=vocab_path,
        )
    id_of = {bytes([b]): i for b, i in enumerate(byte_ids)}
    out = []
    for k, ((left, right), new) in enumerate(zip(merges, rest)):
        if vocab[new] != left + right:
            raise FormatError(
                f"merge {k} ({left!r}, {right!r}) should make id {new}, but {VOCAB_FILE} has {vocab[new]!r} there",
                path=merges_path,
            )
        for part in (left, right):
            if part not in id_of:
                raise FormatError(f"merge {k} uses {part!r}, which no earlier merge made", path=merges_path)
        if left + right in id_of:
            raise FormatError(f"merge {k} makes {left + right!r} again (already id {id_of[left + right]})",
                              path=merges_path)
        id_of[left + right] = new
        out.append((id_of[left], id_of[right], new))
    data = BPEData(byte_ids, out, special_ids, GPT2_PATTERN, "gpt2", {})
    data.validate(vocab_path)
    return data


def _seed_paths(path, merges_path=None, special_tokens_path=None) -> tuple[Path, Path, Path]:
    path = Path(path)
    directory = path if path.is_dir() else path.parent
    vocab_path = directory / VOCAB_FILE if path.is_dir() or path.name == MERGES_FILE else path
    return (
        vocab_path,
        Path(merges_path) if merges_path is not None else directory / MERGES_FILE,
        Path(special_tokens_path) if special_tokens_path is not None else directory / SPECIALS_FILE,
    )


def read_seed003(path, merges_path=None, special_tokens_path=None) -> BPEData:
    """Read gpt_from_scratch's files into BPEData (pattern: GPT-2's).

    ``path`` is the directory holding the three files, or the vocabulary (or
    merges) pickle, whose siblings are used unless given explicitly. A missing
    ``special_tokens.txt`` means no special tokens.
    """
    vocab_path, merges_path, specials_path = _seed_paths(path, merges_path, special_tokens_path)
    for p in (vocab_path, merges_path):
        if not p.is_file():
            raise FormatError(f"missing file {p.name}; gpt_from_scratch's format needs it", path=p)
    vocab = _check_vocab(load_plain_pickle(vocab_path), vocab_path)
    merges = _check_merges(load_plain_pickle(merges_path), merges_path)
    specials = _read_specials_file(specials_path) if specials_path.is_file() else []
    return _assemble(vocab, merges, specials, (vocab_path, merges_path, specials_path))


def sniff_seed003(path, head: bytes) -> bool:
    """True for a directory holding bpe_vocab.pkl and bpe_merges.pkl, or one of those files."""
    path = Path(path)
    if path.is_dir():
        return (path / VOCAB_FILE).is_file() and (path / MERGES_FILE).is_file()
    return path.name in (VOCAB_FILE, MERGES_FILE) and head[:1] == b"\x80"


# ------------------------------------------------------------------ the pattern file
def read_pattern_file(path) -> tuple[bool, str | None]:
    """``(present, pattern)`` from ``pre_tokenization_pattern.txt`` beside ``path``
    (the directory or either pickle); ``(False, None)`` when there is no such file.

    The file is UTF-8 text holding the regex; one final ``\\n`` (or ``\\r\\n``) is
    an end of line, not part of it. ``(?s).+`` (one piece per document) reads
    back as None, no pre-tokenization. Whether the regex compiles is the
    caller's check (formats never need the engine).
    """
    pattern_path = _seed_paths(path)[0].parent / PATTERN_FILE
    if not pattern_path.is_file():
        return False, None
    raw = pattern_path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FormatError(f"not UTF-8 ({e.reason})", path=pattern_path, offset=e.start) from None
    if text.endswith("\r\n"):
        text = text[:-2]
    elif text.endswith("\n"):
        text = text[:-1]
    if not text:
        raise FormatError("empty file; expected the pre-tokenization regex", path=pattern_path, offset=0)
    return True, (None if text == WHOLE_TEXT_PATTERN else text)


def _pattern_file_text(data: BPEData) -> str:
    if data.pattern is None:  # whole documents: the one regex that says so
        return WHOLE_TEXT_PATTERN
    if data.pattern.endswith(("\n", "\r")):
        raise TokenforgeError(
            f"the split pattern ends in a line break, which {PATTERN_FILE} cannot hold "
            "(a final line break is read as the end of the line); write it as the escape \\n instead"
        )
    return data.pattern


# ------------------------------------------------------------------ writing
def check_special_line(text: str) -> None:
    """Refuse a special token that cannot be one line of ``special_tokens.txt``."""
    if text != text.strip() or "\n" in text or "\r" in text:
        raise TokenforgeError(
            f"special token {text!r} cannot be one line of {SPECIALS_FILE} "
            "(gpt_from_scratch's files need specials without line breaks or surrounding whitespace)"
        )


def _check_writable(data: BPEData, allow_other_pattern: bool, directory: Path) -> None:
    data.validate(directory)
    ranks = mergeable_ranks(data)  # refuses two ids with the same bytes
    if data.pattern != GPT2_PATTERN and not allow_other_pattern:
        raise TokenforgeError(
            "gpt_from_scratch's own code always uses GPT-2's split pattern; "
            f"this vocabulary uses {data.pattern_name!r}. Pass allow_other_pattern=True to write it anyway "
            f"(the pattern goes to {PATTERN_FILE}, which tokenforge reads back)"
        )
    _pattern_file_text(data)
    for text in data.special_tokens:
        check_special_line(text)
        if text.encode("utf-8") in ranks:
            raise TokenforgeError(f"special token {text!r} has the same bytes as an ordinary token")


def write_seed003(directory, data: BPEData, *, allow_other_pattern: bool = False) -> None:
    """Write ``data`` as gpt_from_scratch's files in ``directory``: the three
    vocabulary files and ``pre_tokenization_pattern.txt``.

    Each file is written atomically (pickle protocol 4, plain data only); the
    four together are not one transaction. The seed's own code splits with
    GPT-2's pattern, so another pattern is refused unless ``allow_other_pattern``
    is set; it is then written to the pattern file, which
    :func:`read_pattern_file` reads back (``None``, no pre-tokenization, is
    written as ``(?s).+``).
    """
    directory = Path(directory)
    _check_writable(data, allow_other_pattern, directory)
    token_bytes = data.token_bytes_list()
    vocab = {i: token_bytes[i] for i in sorted(list(data.byte_ids) + [m[2] for m in data.merges])}
    vocab.update({i: text.encode("utf-8") for text, i in data.special_tokens.items()})
    vocab = dict(sorted(vocab.items()))
    merges = [(token_bytes[a], token_bytes[b]) for a, b, _ in data.merges]
    specials = [text for text, _ in sorted(data.special_tokens.items(), key=lambda kv: kv[1])]
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write(directory / MERGES_FILE, pickle.dumps(merges, protocol=4))
    atomic_write(directory / SPECIALS_FILE, "".join(t + "\n" for t in specials))
    atomic_write(directory / PATTERN_FILE, _pattern_file_text(data))
    atomic_write(directory / VOCAB_FILE, pickle.dumps(vocab, protocol=4))
