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

The same walk simulates the unpickler's stack and memo, so bombs are refused
before anything is built (:class:`UnsafePickleError`, linear in the file): a
"billion laughs" of nested memo references (items are counted through every
shared reference, at most :func:`_max_items` for the file's size), nesting
deeper than :data:`_MAX_DEPTH`, a container that contains itself, and a memo
index beyond the opcodes read (the unpickler's memo is an array that long).

The writer pickles plain dicts, lists, tuples, bytes and ints (protocol 4), so
the seed's own code loads the files with ``pickle.load``.

Not handled: pickles of protocol 0-2 that store bytes through ``_codecs``
(refused as imports), and objects other than plain data; a regex ending in a
line break in the pattern file (one final line break is taken as the file's
end of line, so the writer refuses such a pattern); writing the files as one
transaction (each file is atomic alone).
"""

from __future__ import annotations

import io
import os
import pickle
import pickletools
from pathlib import Path
from typing import IO, Any, Iterator, NoReturn, Sized, cast

from ..errors import FormatError, TokenforgeError, UnsafePickleError
from .atomic import atomic_write_all
from .bpe_data import BPEData
from .patterns import GPT2_PATTERN, WHOLE_TEXT_PATTERN
from .tiktoken_io import mergeable_ranks

__all__ = [
    "VOCAB_FILE",
    "MERGES_FILE",
    "SPECIALS_FILE",
    "PATTERN_FILE",
    "load_plain_pickle",
    "load_plain_pickle_bytes",
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
_GET_OPCODES = frozenset(("GET", "BINGET", "LONG_BINGET"))
_STRING_OPCODES = frozenset("STRING BINSTRING SHORT_BINSTRING UNICODE BINUNICODE SHORT_BINUNICODE BINUNICODE8".split())
_PLAIN_TYPES = "dict, list, tuple, set, int, bytes, str"


# ------------------------------------------------------------------ safe unpickling
def pickle_opcodes(raw: bytes) -> Iterator[tuple[pickletools.OpcodeInfo, Any, int]]:
    """``pickletools.genops`` of bytes in memory (decoding only, nothing runs): every
    opcode has its position (typeshed's ``int | None`` is for streams without ``tell``)."""
    return cast(Iterator[tuple[pickletools.OpcodeInfo, Any, int]], pickletools.genops(raw))


class _RefusingUnpickler(pickle.Unpickler):
    """Second line of defence: an unpickler that can import and call nothing."""

    def __init__(self, file: IO[bytes], path: str | os.PathLike[str]) -> None:
        super().__init__(file)
        self._path = path

    def find_class(self, module: str, name: str) -> NoReturn:
        raise UnsafePickleError(
            f"refused: the pickle tries to import {module}.{name}; only plain data ({_PLAIN_TYPES}) is accepted",
            path=self._path,
        )

    def persistent_load(self, pid: object) -> NoReturn:
        raise UnsafePickleError(
            "refused: the pickle uses a persistent id; only plain data is accepted", path=self._path
        )


def _what_it_imports(op_name: str, arg: object, recent_strings: list) -> str:
    if op_name in ("GLOBAL", "INST") and isinstance(arg, str):
        return " tries to import " + arg.replace(" ", ".", 1)
    if op_name == "STACK_GLOBAL" and recent_strings[-2] is not None:
        return f" tries to import {recent_strings[-2]}.{recent_strings[-1]}"
    if op_name in ("REDUCE", "NEWOBJ", "NEWOBJ_EX", "OBJ", "BUILD"):
        return " tries to call or build an object"
    if op_name.startswith("EXT"):
        return f" tries to import extension code {arg}"
    return ""


#: Deepest nesting admitted (seed 003's data is three levels deep).
_MAX_DEPTH = 100


def _max_items(n_bytes: int) -> int:
    """Most items (scalars and containers, as a walk of the result counts them)
    a pickle of ``n_bytes`` bytes may hold: every item of plain data costs at
    least one opcode byte unless the memo shares it, so a few per byte."""
    return 4 * n_bytes + 256


def _short_text(e: object) -> str:
    text = str(e)
    return text if len(text) <= 200 else text[:200] + "..."


class _Broken(Exception):
    """The opcodes do not make a well-formed stack (the unpickler would fail too)."""


class _Shape:
    """The unpickler's stack and memo simulated from the opcodes alone.

    A scalar is the leaf ``-1``; each container is a node (an index into
    ``kids``) listing what was put into it, by reference, so a memo GET of a
    container shares its node as the real unpickler shares the object.
    ``low`` holds each node's depth as far as it is built, a lower bound of its
    final depth (containers only grow), so a deep nest is refused as it is
    built. :func:`_scan_opcodes` does the frequent opcodes inline and calls
    :meth:`step` for the rest (only opcodes in ``_PLAIN_OPCODES``).
    """

    SCALARS = frozenset(
        """NONE NEWTRUE NEWFALSE INT BININT BININT1 BININT2 LONG LONG1 LONG4 FLOAT BINFLOAT
        STRING BINSTRING SHORT_BINSTRING BINBYTES SHORT_BINBYTES BINBYTES8 BYTEARRAY8
        UNICODE BINUNICODE SHORT_BINUNICODE BINUNICODE8""".split()
    )
    EMPTY = frozenset("EMPTY_LIST EMPTY_DICT EMPTY_SET EMPTY_TUPLE".split())
    _FROM_MARK = frozenset("LIST TUPLE DICT FROZENSET".split())
    _INTO_FROM_MARK = frozenset("APPENDS SETITEMS ADDITEMS".split())
    _TUPLE_N = {"TUPLE1": 1, "TUPLE2": 2, "TUPLE3": 3}

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = path
        self.stack: list[int] = []
        self.marks: list[int] = []
        self.memo: dict[int, int] = {}
        self.kids: list[list[int]] = []
        self.low: list[int] = []
        self.root: int | None = None

    def too_deep(self, pos: int | None) -> UnsafePickleError:
        return UnsafePickleError(
            f"refused: data nested more than {_MAX_DEPTH} levels deep; seed 003's pickles are three levels deep",
            path=self.path,
            offset=pos,
        )

    def _depth_of(self, items: list[int], pos: int) -> int:
        low = self.low
        d = 1 + max((low[c] for c in items if c >= 0), default=0)
        if d > _MAX_DEPTH:
            raise self.too_deep(pos)
        return d

    def _new(self, items: list[int], pos: int) -> int:
        self.low.append(self._depth_of(items, pos))
        self.kids.append(items)
        return len(self.kids) - 1

    def _pop(self) -> int:
        if not self.stack or (self.marks and self.marks[-1] == len(self.stack)):
            raise _Broken("an opcode takes from an empty stack")
        return self.stack.pop()

    def _pop_mark(self) -> list[int]:
        if not self.marks:
            raise _Broken("an opcode needs a MARK that is not there")
        k = self.marks.pop()
        items = self.stack[k:]
        del self.stack[k:]
        return items

    def _into_top(self, items: list[int], pos: int) -> None:
        if not self.stack or (self.marks and self.marks[-1] == len(self.stack)) or self.stack[-1] < 0:
            raise _Broken("items added to something that is not a container")
        t = self.stack[-1]
        self.kids[t].extend(items)
        self.low[t] = max(self.low[t], self._depth_of(items, pos))

    def step(self, name: str, arg: Any, pos: int, n_ops: int) -> None:
        stack = self.stack
        if name == "MARK":
            self.marks.append(len(stack))
        elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
            # The unpickler's memo is an array as long as the largest index;
            # a writer numbers its entries 0, 1, 2, ... (at most one per opcode).
            if not isinstance(arg, int) or arg < 0 or arg > n_ops:
                raise UnsafePickleError(
                    f"refused: memo index {_short_text(arg)} is beyond the {n_ops} opcodes before it "
                    "(a pickle writer numbers its memo from 0)",
                    path=self.path,
                    offset=pos,
                )
            if not stack or (self.marks and self.marks[-1] == len(stack)):
                raise _Broken("memo store with an empty stack")
            self.memo[arg] = stack[-1]
        elif name == "APPEND":
            x = self._pop()
            self._into_top([x], pos)
        elif name == "SETITEM":
            v = self._pop()
            k = self._pop()
            self._into_top([k, v], pos)
        elif name in self._INTO_FROM_MARK:
            self._into_top(self._pop_mark(), pos)
        elif name in self._FROM_MARK:
            stack.append(self._new(self._pop_mark(), pos))
        elif name in self._TUPLE_N:
            items = [self._pop() for _ in range(self._TUPLE_N[name])][::-1]
            stack.append(self._new(items, pos))
        elif name == "POP":
            if self.marks and self.marks[-1] == len(stack):
                self.marks.pop()
            else:
                self._pop()
        elif name == "POP_MARK":
            self._pop_mark()
        elif name == "DUP":
            stack.append(self._pop())
            stack.append(stack[-1])
        elif name == "STOP":
            if len(stack) != 1 or self.marks:
                raise _Broken("STOP with a stack that does not hold exactly one value")
            self.root = stack.pop()
        # PROTO, FRAME: no effect on the data

    def check_result(self, n_bytes: int) -> None:
        """Refuse a cycle, nesting deeper than _MAX_DEPTH or more items than
        :func:`_max_items` allows for a file of ``n_bytes`` bytes."""
        max_items = _max_items(n_bytes)
        root = self.root
        if root is None:
            raise FormatError("corrupt pickle: no STOP opcode", path=self.path, offset=n_bytes)
        if root < 0:
            return
        kids = self.kids
        size = [0] * len(kids)
        depth = [0] * len(kids)
        state = bytearray(len(kids))  # 0 new, 1 on the current path, 2 done
        todo = [root]
        while todo:  # iterative post-order walk over the shared nodes: linear in the opcodes
            v = todo[-1]
            if state[v] == 0:
                state[v] = 1
                for c in kids[v]:
                    if c >= 0:
                        if state[c] == 1:
                            raise UnsafePickleError(
                                "refused: the pickle holds a container that contains itself; only plain data is accepted",
                                path=self.path,
                            )
                        if state[c] == 0:
                            todo.append(c)
                continue
            todo.pop()
            if state[v] == 2:
                continue
            n, d = 1, 0
            for c in kids[v]:
                if c < 0:
                    n += 1
                else:
                    n += size[c]
                    if depth[c] > d:
                        d = depth[c]
            d += 1
            if d > _MAX_DEPTH:
                raise self.too_deep(None)
            if n > max_items:
                raise UnsafePickleError(
                    f"refused: the data holds more than {max_items} items (counting each shared reference) "
                    f"in a file of {n_bytes} bytes: a memo bomb, not a vocabulary",
                    path=self.path,
                )
            size[v], depth[v], state[v] = n, d, 2


def _refuse_opcode(name: str, arg: object, pos: int, recent: list, path: str | os.PathLike[str]) -> UnsafePickleError:
    return UnsafePickleError(
        f"refused: opcode {name}{_what_it_imports(name, arg, recent)}; only plain data ({_PLAIN_TYPES}) is accepted",
        path=path,
        offset=pos,
    )


def _scan_opcodes(raw: bytes, path: str | os.PathLike[str]) -> None:
    """Refuse any opcode that is not plain data, truncation, trailing bytes and bombs.

    Besides the opcode check, the scan simulates the unpickler's stack and memo
    (:class:`_Shape`), so the shape of the result is known before anything is
    built: a memo index beyond the number of opcodes read (the memo is an array
    that index would size), a reference cycle, nesting deeper than
    :data:`_MAX_DEPTH`, or more items than :func:`_max_items` allows for the
    file's size -- counted as a walk of the result sees them, so a container
    referenced ten times from the memo counts ten times ("billion laughs") --
    are refused with :class:`UnsafePickleError`. Linear in the number of opcodes.

    Strings pushed on the stack (directly or from the memo) are remembered
    only to name the global a STACK_GLOBAL would import.
    """
    if not raw:
        raise FormatError("empty file; expected a pickle", path=path, offset=0)
    recent: list = [None, None]  # the last two strings pushed
    names: dict = {}  # memo index -> the string stored there (for STACK_GLOBAL's message)
    top = None  # the string the previous opcode pushed, if any
    end = 0
    sim = _Shape(path)
    stack, marks, memo, kids, low, step = sim.stack, sim.marks, sim.memo, sim.kids, sim.low, sim.step
    scalars, empties = _Shape.SCALARS, _Shape.EMPTY
    ops = enumerate(pickle_opcodes(raw))
    broken = None  # the simulation's first structural error, reported if every opcode decodes
    try:
        try:
            for n_ops, (op, arg, pos) in ops:
                name = op.name
                end = pos + 1
                if name in scalars:  # the common case first: one value pushed
                    stack.append(-1)
                    if name in _STRING_OPCODES:
                        top = arg
                        recent = [recent[1], arg]
                    else:
                        top = None
                    continue
                if name not in _PLAIN_OPCODES:
                    raise _refuse_opcode(name, arg, pos, recent, path)
                # MEMOIZE, the GETs, TUPLE2 and APPEND are most of the other
                # opcodes of a seed file (or a bomb); done here, not in step(),
                # which would cost a call each.
                if name == "MEMOIZE":
                    if not stack or (marks and marks[-1] == len(stack)):
                        raise _Broken("memo store with an empty stack")
                    if top is not None:
                        names[len(memo)] = top
                    memo[len(memo)] = stack[-1]
                    continue
                if name in ("PUT", "BINPUT", "LONG_BINPUT"):
                    if top is not None:
                        names[arg] = top
                    step(name, arg, pos, n_ops)
                    continue
                top = None
                if name in _GET_OPCODES:
                    got = memo.get(arg)
                    if got is None:
                        raise _Broken(f"memo index {_short_text(arg)} was never stored")
                    stack.append(got)
                    if arg in names:
                        recent = [recent[1], names[arg]]
                elif name == "TUPLE2":
                    if len(stack) < 2 or (marks and marks[-1] > len(stack) - 2):
                        raise _Broken("an opcode takes from an empty stack")
                    a, b = stack[-2:]
                    d = 1 + max(low[a] if a >= 0 else 0, low[b] if b >= 0 else 0)
                    if d > _MAX_DEPTH:
                        raise sim.too_deep(pos)
                    low.append(d)
                    kids.append([a, b])
                    del stack[-2:]
                    stack.append(len(kids) - 1)
                elif name in empties:
                    low.append(1)
                    kids.append([])
                    stack.append(len(kids) - 1)
                elif (
                    name == "APPEND"
                    and len(stack) > 1
                    and stack[-2] >= 0
                    and not (marks and marks[-1] >= len(stack) - 1)
                ):
                    x = stack.pop()
                    t = stack[-1]
                    kids[t].append(x)
                    if x >= 0 and low[x] >= low[t]:
                        if low[x] >= _MAX_DEPTH:
                            raise sim.too_deep(pos)
                        low[t] = low[x] + 1
                else:
                    step(name, arg, pos, n_ops)
        except _Broken as e:
            broken = FormatError(f"corrupt pickle: {e}", path=path, offset=end - 1)
            for _, (op, arg, pos) in ops:  # still refuse unsafe opcodes, and find where decoding fails
                end = pos + 1
                if op.name not in _PLAIN_OPCODES:
                    raise _refuse_opcode(op.name, arg, pos, recent, path) from None
    except ValueError as e:  # genops: truncated, or not a pickle at all
        if isinstance(e, TokenforgeError):
            raise
        raise FormatError(f"corrupt or truncated pickle: {_short_text(e)}", path=path, offset=end) from None
    if end != len(raw):
        raise FormatError(f"{len(raw) - end} unexpected bytes after the pickle's end", path=path, offset=end)
    if broken is not None:
        raise broken
    sim.check_result(len(raw))


def load_plain_pickle(path: str | os.PathLike[str]) -> Any:
    """Unpickle ``path`` if, and only if, it holds plain data; never runs its code."""
    path = Path(path)
    return load_plain_pickle_bytes(path.read_bytes(), path)


def load_plain_pickle_bytes(raw: bytes, path: str | os.PathLike[str]) -> Any:
    """:func:`load_plain_pickle` of bytes read from ``path`` (named in errors)."""
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
def _describe(x: object, typed: bool = True) -> str:
    """A short description of a value from a pickle, for an error message: never
    a full repr (an int of 100,000 digits cannot even be printed)."""
    if isinstance(x, int) and not isinstance(x, bool) and x.bit_length() > 64:
        return f"an int of {x.bit_length()} bits"
    if isinstance(x, (bytes, bytearray, str, int, float, bool)) or x is None:
        text = repr(x)
        text = text if len(text) <= 60 else text[:57] + "..."
        return f"{type(x).__name__} {text}" if typed else text
    if isinstance(x, Sized):
        return f"a {type(x).__name__} of {len(x)} items"
    return f"a {type(x).__name__}"


def _check_vocab(vocab: object, path: str | os.PathLike[str]) -> dict[int, bytes]:
    if not isinstance(vocab, dict):
        raise FormatError(f"expected Dict[int, bytes], found {type(vocab).__name__}", path=path)
    out = {}
    for i, b in vocab.items():
        if not isinstance(i, int) or isinstance(i, bool) or i < 0:
            raise FormatError(
                f"expected Dict[int, bytes]; key {_describe(i, typed=False)} is not a non-negative int", path=path
            )
        if i >= 1 << 32:  # token ids are 32-bit
            raise FormatError(f"id {_describe(i)} does not fit in 32 bits", path=path)
        if not isinstance(b, (bytes, bytearray)) or not b:
            raise FormatError(f"expected Dict[int, bytes]; id {i} maps to {_describe(b)}", path=path)
        out[i] = bytes(b)
    return out


def _check_merges(merges: object, path: str | os.PathLike[str]) -> list[tuple[bytes, bytes]]:
    if not isinstance(merges, (list, tuple)):
        raise FormatError(f"expected List[Tuple[bytes, bytes]], found {type(merges).__name__}", path=path)
    out = []
    for k, m in enumerate(merges):
        ok = isinstance(m, (tuple, list)) and len(m) == 2 and all(isinstance(x, (bytes, bytearray)) and x for x in m)
        if not ok:
            raise FormatError(f"merge {k}: expected a pair of non-empty bytes, found {_describe(m)}", path=path)
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


def _unique_id(
    by_bytes: dict[bytes, list[int]], wanted: bytes, exclude: set[int], what: str, path: str | os.PathLike[str]
) -> int:
    ids = [i for i in by_bytes.get(wanted, []) if i not in exclude]
    if len(ids) != 1:
        found = "is missing" if not ids else f"appears under several ids {sorted(ids)}"
        raise FormatError(f"{what} ({wanted!r}) {found} in the vocabulary", path=path)
    return ids[0]


def _assemble(
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    specials: list[str],
    paths: tuple[Path, Path, Path],
) -> BPEData:
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
            raise FormatError(
                f"merge {k} makes {left + right!r} again (already id {id_of[left + right]})", path=merges_path
            )
        id_of[left + right] = new
        out.append((id_of[left], id_of[right], new))
    data = BPEData(byte_ids, out, special_ids, GPT2_PATTERN, "gpt2", {})
    data.validate(vocab_path)
    return data


def _seed_paths(
    path: str | os.PathLike[str],
    merges_path: str | os.PathLike[str] | None = None,
    special_tokens_path: str | os.PathLike[str] | None = None,
) -> tuple[Path, Path, Path]:
    path = Path(path)
    directory = path if path.is_dir() else path.parent
    vocab_path = directory / VOCAB_FILE if path.is_dir() or path.name == MERGES_FILE else path
    return (
        vocab_path,
        Path(merges_path) if merges_path is not None else directory / MERGES_FILE,
        Path(special_tokens_path) if special_tokens_path is not None else directory / SPECIALS_FILE,
    )


def read_seed003(
    path: str | os.PathLike[str],
    merges_path: str | os.PathLike[str] | None = None,
    special_tokens_path: str | os.PathLike[str] | None = None,
) -> BPEData:
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


def sniff_seed003(path: str | os.PathLike[str], head: bytes) -> bool:
    """True for a directory holding bpe_vocab.pkl and bpe_merges.pkl, or one of those files."""
    path = Path(path)
    if path.is_dir():
        return (path / VOCAB_FILE).is_file() and (path / MERGES_FILE).is_file()
    return path.name in (VOCAB_FILE, MERGES_FILE) and head[:1] == b"\x80"


# ------------------------------------------------------------------ the pattern file
def read_pattern_file(path: str | os.PathLike[str]) -> tuple[bool, str | None]:
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


def write_seed003(directory: str | os.PathLike[str], data: BPEData, *, allow_other_pattern: bool = False) -> None:
    """Write ``data`` as gpt_from_scratch's files in ``directory``: the three
    vocabulary files and ``pre_tokenization_pattern.txt``, as one save (all
    four written in full before any replaces its file:
    :func:`~.atomic.atomic_write_all`).

    The seed's own code splits with GPT-2's pattern, so another pattern is
    refused unless ``allow_other_pattern`` is set; it is then written to the
    pattern file, which :func:`read_pattern_file` reads back (``None``, no
    pre-tokenization, is written as ``(?s).+``).
    """
    items = seed003_items(directory, data, allow_other_pattern=allow_other_pattern)
    Path(directory).mkdir(parents=True, exist_ok=True)
    atomic_write_all(items)


def seed003_items(
    directory: str | os.PathLike[str], data: BPEData, *, allow_other_pattern: bool = False
) -> list[tuple[Path, bytes]]:
    """The (path, content) of each file :func:`write_seed003` writes, after every
    check and before anything is written (pickle protocol 4, plain data only);
    ``bpe_vocab.pkl``, the file the seed's loader opens first, comes first, so
    :func:`~.atomic.atomic_write_all` replaces it last."""
    directory = Path(directory)
    _check_writable(data, allow_other_pattern, directory)
    token_bytes = data.token_bytes_list()
    vocab = {i: token_bytes[i] for i in sorted(list(data.byte_ids) + [m[2] for m in data.merges])}
    vocab.update({i: text.encode("utf-8") for text, i in data.special_tokens.items()})
    vocab = dict(sorted(vocab.items()))
    merges = [(token_bytes[a], token_bytes[b]) for a, b, _ in data.merges]
    specials = [text for text, _ in sorted(data.special_tokens.items(), key=lambda kv: kv[1])]
    return [
        (directory / VOCAB_FILE, pickle.dumps(vocab, protocol=4)),
        (directory / MERGES_FILE, pickle.dumps(merges, protocol=4)),
        (directory / SPECIALS_FILE, "".join(t + "\n" for t in specials).encode("utf-8")),
        (directory / PATTERN_FILE, _pattern_file_text(data).encode("utf-8")),
    ]
