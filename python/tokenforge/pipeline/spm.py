"""A SentencePiece model's pipeline, with sentencepiece's own rules.

The description (from :mod:`tokenforge.formats.sentencepiece_model`) holds the
ModelProto's pieces ``[piece, score, type]``, the model type and the settings
that change encoding. What runs, step by step as sentencepiece runs it:

* **normalizer** (``normalizer.cc``): the precompiled charsmap the file carries
  -- a Darts-clone double-array trie over UTF-8 bytes whose values point into a
  blob of NUL-terminated replacements -- applied by longest prefix match, a
  character at a time where nothing matches (an invalid byte is U+FFFD);
  user-defined symbols are copied as they are; ``remove_extra_whitespaces``
  drops leading, trailing and repeated spaces; ``escape_whitespaces`` writes
  a space as U+2581; ``add_dummy_prefix`` starts the text with one;
* **model**: ``unigram`` (the optimized Viterbi of ``unigram_model.cc``, in
  float32 as there: a user-defined piece scores ``bytes * max_score - 0.1``,
  unused pieces are skipped, an unknown character scores ``min_score - 10``),
  ``bpe`` (the highest-scoring adjacent pair that is a piece is merged first,
  leftmost on ties; user-defined symbols are never merged; unused pieces are
  split back into their parts), ``word`` (split before each U+2581) and
  ``char``;
* unknown pieces: consecutive ones become one unknown id, or with
  ``byte_fallback`` the ids of their UTF-8 bytes (``<0x41>``);
* **decoder** (``SentencePieceProcessor::Decode``): control pieces vanish, an
  unknown id is ``unk_surface`` (`` ⁇ ``), byte pieces are joined and decoded
  (each invalid byte one U+FFFD), U+2581 becomes a space and the first
  piece's leading one is dropped.

The charsmap trie is walked with every index checked against its size, so a
damaged trie is a :class:`~tokenforge.errors.FormatError` naming the unit, never
a read outside it; each walk is bounded by the text's length.

Not handled (refused at load): ``treat_whitespace_as_suffix``, a
denormalizer spec with a charsmap, sampling (``alpha``/n-best: encoding is the
best segmentation only).
"""

from __future__ import annotations

import base64
import heapq
import math
import struct

from ..errors import FormatError
from ..reference.unigram import best_path
from .steps import Desc

__all__ = ["build_spm", "Charsmap", "SpmPipeline"]

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
TYPES = (NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE)
KINDS = ("UNIGRAM", "BPE", "WORD", "CHAR")  # the ModelProto enum names
SPACE = "\u2581"
_F32 = struct.Struct("<f")
FLT_MAX = 3.4028234663852886e38
FLT_MIN = 1.1754943508222875e-38


def f32(x: float) -> float:
    """``x`` rounded to float32 (sentencepiece keeps scores and path sums in float)."""
    return _F32.unpack(_F32.pack(x))[0]


def _valid_utf8_len(data: bytes, pos: int) -> int:
    """sentencepiece's ``IsValidDecodeUTF8``: the length of the valid character at
    ``pos``, or 0 when the byte there starts none (then one byte is consumed)."""
    b0 = data[pos]
    if b0 < 0x80:
        return 1
    for n in (2, 3, 4):
        if pos + n <= len(data):
            try:
                data[pos : pos + n].decode("utf-8")
                return n
            except UnicodeDecodeError:
                continue
    return 0


def _one_char_len(b0: int) -> int:
    return (1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4)[b0 >> 4]


class Charsmap:
    """The precompiled charsmap: a Darts-clone trie and its replacement strings."""

    def __init__(self, blob: bytes, where: Desc):
        if len(blob) <= 4:
            raise where.fail(f"the precompiled charsmap has {len(blob)} bytes; too short for its header")
        (size,) = struct.unpack_from("<I", blob)
        if size >= len(blob) - 4 + 1 or size % 4 or size == 0:
            raise where.fail(f"the charsmap's trie size {size} does not fit its {len(blob)} bytes")
        self.units = struct.unpack_from(f"<{size // 4}I", blob, 4)
        self.strings = blob[4 + size :]
        self.where = where
        self._cache: dict[int, str] = {}
        root = self.units[0]
        base = self._offset(root)
        # which first bytes can start a rule (a text byte that cannot is copied as it is)
        self.first = bytes(
            1 if (base ^ b) < len(self.units) and self._label(self.units[base ^ b]) == b else 0 for b in range(256)
        )

    @staticmethod
    def _offset(u: int) -> int:
        return (u >> 10) << ((u & (1 << 9)) >> 6)

    @staticmethod
    def _label(u: int) -> int:
        return u & ((1 << 31) | 0xFF)

    def _bad(self, pos: int) -> FormatError:
        return self.where.fail(f"the charsmap's trie points outside itself (unit {pos} of {len(self.units)})")

    def longest(self, data: bytes, start: int) -> tuple[int, int]:
        """(length, value) of the longest rule matching ``data`` at ``start``; (0, 0) if none."""
        units = self.units
        n = len(units)
        pos = self._offset(units[0])
        best_len = best_val = 0
        for i in range(start, len(data)):
            c = data[i]
            pos ^= c
            if pos >= n:
                raise self._bad(pos)
            u = units[pos]
            if self._label(u) != c:
                break
            pos ^= self._offset(u)
            if (u >> 8) & 1:
                if pos >= n:
                    raise self._bad(pos)
                best_len, best_val = i + 1 - start, units[pos] & 0x7FFFFFFF
        return best_len, best_val

    def replacement(self, value: int) -> str:
        s = self._cache.get(value)
        if s is None:
            end = self.strings.find(b"\0", value)
            if value >= len(self.strings) or end == -1:
                raise self.where.fail(f"a charsmap rule points at byte {value}, outside its replacement strings")
            try:
                s = self.strings[value:end].decode("utf-8")
            except UnicodeDecodeError:
                raise self.where.fail(f"the charsmap replacement at byte {value} is not UTF-8") from None
            self._cache[value] = s
        return s


class _Matcher:
    """sentencepiece's PrefixMatcher: the longest user-defined symbol at a place
    (a byte trie of nested dicts, -1 marking a symbol's end: one walk, linear in
    the match)."""

    def __init__(self, symbols: list[str]):
        self.trie: dict = {}
        for sym in symbols:
            node = self.trie
            for b in sym.encode("utf-8"):
                node = node.setdefault(b, {})
            node[-1] = True
        self.lengths = bool(symbols)  # whether there is any symbol at all

    def match(self, data: bytes, pos: int) -> int:
        node, best, k = self.trie, 0, pos
        while k < len(data):
            nxt = node.get(data[k])
            if nxt is None:
                break
            node = nxt
            k += 1
            if -1 in node:
                best = k - pos
        return best


class SpmModel:
    """The pieces and their types; ``pieces[id]`` for the tokenizer's views."""

    def __init__(self, d: Desc):
        entries = d.items("pieces")
        if not entries:
            raise d.fail("no pieces", "pieces")
        self.pieces: list[str] = []
        self.scores: list[float] = []
        self.types: list[int] = []
        self.normal: dict[str, int] = {}  # NORMAL, USER_DEFINED, UNUSED
        self.reserved: dict[str, int] = {}  # the others
        self.unk_id = -1
        for i, e in enumerate(entries):
            v = e.value
            ok = isinstance(v, list) and len(v) == 3 and isinstance(v[0], str) and isinstance(v[2], int)
            if not ok or not isinstance(v[1], (int, float)) or isinstance(v[1], bool) or not math.isfinite(v[1]):
                raise e.fail("expected [piece, score, type] with a finite score")
            piece, score, t = v
            if not piece:
                raise e.fail("piece must not be empty")
            if t not in TYPES:
                raise e.fail(f"unknown piece type {t}")
            table = self.normal if t in (NORMAL, USER_DEFINED, UNUSED) else self.reserved
            if piece in table:
                raise e.fail(f"{piece!r} is already defined (id {table[piece]})")
            table[piece] = i
            if t == UNKNOWN:
                if self.unk_id >= 0:
                    raise e.fail("unk is already defined")
                self.unk_id = i
            self.pieces.append(piece)
            self.scores.append(f32(float(score)))
            self.types.append(t)
        if self.unk_id < 0:
            raise d.fail("unk is not defined (no piece of type UNKNOWN)", "pieces")
        self.byte_fallback = d.get("byte_fallback", bool)
        self.byte_ids: list[int] = []
        if self.byte_fallback:
            found = {}
            for i, (p, t) in enumerate(zip(self.pieces, self.types)):
                if t == BYTE:
                    b = _byte_piece(p)
                    if b is None:
                        raise d.fail(f"byte piece {p!r} (id {i}) is invalid", "pieces")
                    found[b] = i
            if len(found) != 256:
                raise d.fail(f"byte_fallback is on but there are {len(found)} byte pieces, not 256", "pieces")
            self.byte_ids = [found[b] for b in range(256)]
        elif BYTE in self.types:
            raise d.fail("a byte piece is found although byte_fallback is false", "pieces")
        normal = [s for s, t in zip(self.scores, self.types) if t == NORMAL]
        self.min_score = min(normal, default=FLT_MAX)
        self.max_score = max(normal, default=FLT_MIN)
        # the trie sentencepiece walks (nested dicts by character, "" marks a piece's
        # end with its id): linear in the pieces' length, and the Viterbi stops at
        # the first character no piece continues with
        self.trie: dict = {}
        for p, i in self.normal.items():
            node = self.trie
            for c in p:
                node = node.setdefault(c, {})
            node[""] = i

    def piece_to_id(self, w: str) -> int:
        i = self.reserved.get(w)
        if i is None:
            i = self.normal.get(w, self.unk_id)
        return i

    def detail(self, i: int) -> dict:
        names = {NORMAL: "normal", UNKNOWN: "unknown", CONTROL: "control", USER_DEFINED: "user_defined"}
        names.update({UNUSED: "unused", BYTE: "byte"})
        return {"score": self.scores[i], "type": names[self.types[i]]}


def _byte_of(p: str) -> int:
    """The byte of a piece of type BYTE (checked when the model was read with byte
    fallback; without it such a piece is checked here, when it is decoded)."""
    b = _byte_piece(p)
    if b is None:
        raise FormatError(f"byte piece {p!r} does not name a byte (<0xNN>)")
    return b


def _byte_piece(p: str) -> int | None:
    """The byte a byte piece stands for: only sentencepiece's own spelling,
    ``<0xNN>`` with two upper-case hex digits (``int`` alone would also take
    ``<0x-1>`` or ``<0x+F>``, and 256 such pieces would not cover the bytes)."""
    if len(p) == 6 and p.startswith("<0x") and p.endswith(">"):
        digits = p[3:5]
        if all(c in "0123456789ABCDEF" for c in digits):
            return int(digits, 16)
    return None


class SpmPipeline:
    """Normalize, segment, resolve unknown pieces; decode (the rules of the module doc)."""

    def __init__(self, d: Desc):
        md = d.sub("model")
        self.kind = md.get("kind", str)
        if self.kind not in KINDS:
            raise md.fail(f"model type {self.kind!r} is not supported (known: {', '.join(KINDS)})", "kind")
        self.model = SpmModel(md)
        if md.get("treat_whitespace_as_suffix", bool, False):
            raise md.fail("treat_whitespace_as_suffix is not supported", "treat_whitespace_as_suffix")
        self.unk_surface = md.get("unk_surface", str, " \u2047 ")
        nd = d.sub("normalizer")
        self.add_dummy_prefix = nd.get("add_dummy_prefix", bool, True)
        self.remove_extra_whitespaces = nd.get("remove_extra_whitespaces", bool, True)
        self.escape_whitespaces = nd.get("escape_whitespaces", bool, True)
        cmap = nd.get("precompiled_charsmap", str, "")
        try:
            blob = base64.b64decode(cmap.encode("ascii"), validate=True)
        except (ValueError, UnicodeEncodeError):
            raise nd.fail("precompiled_charsmap is not base64", "precompiled_charsmap") from None
        self.charsmap = Charsmap(blob, nd) if blob else None
        user = [p for p, t in zip(self.model.pieces, self.model.types) if t == USER_DEFINED]
        self.matcher = _Matcher(user)
        self.specials = {p: i for i, (p, t) in enumerate(zip(self.model.pieces, self.model.types)) if t == CONTROL}
        self._cache: dict[str, list[int]] = {}
        from .. import _core

        m = self.model
        # the native engine (normalizer and model in Rust): the same rules, checked
        # against this module's loops (the engine for text with lone surrogates)
        self.native = _core.SpmEncoder(
            m.pieces,
            m.scores,
            m.types,
            self.kind,
            m.unk_id,
            m.byte_ids if m.byte_fallback else None,
            blob,
            self.add_dummy_prefix,
            self.remove_extra_whitespaces,
            self.escape_whitespaces,
        )

    # ---- normalizer --------------------------------------------------------
    def _prefix(self, data: bytes, pos: int) -> tuple[str, int]:
        """NormalizePrefix: (normalized text, bytes consumed) at ``pos``."""
        n = self.matcher.match(data, pos) if self.matcher.lengths else 0
        if n:
            return data[pos : pos + n].decode("utf-8"), n
        cm = self.charsmap
        if cm is not None and cm.first[data[pos]]:
            length, value = cm.longest(data, pos)
            if length:
                return cm.replacement(value), length
        k = _valid_utf8_len(data, pos)
        if k == 0:
            return "\ufffd", 1
        return data[pos : pos + k].decode("utf-8"), k

    def normalize(self, text: str) -> str:
        try:
            return self.native.normalize(text)
        except UnicodeEncodeError:  # lone surrogates: the Python rules below
            return self.normalize_reference(text)

    def normalize_reference(self, text: str) -> str:
        """:meth:`normalize` in Python (the slow reference of the Rust normalizer)."""
        data = text.encode("utf-8", "surrogatepass")
        n = len(data)
        pos = 0
        rm = self.remove_extra_whitespaces
        if rm:
            while pos < n:
                s, k = self._prefix(data, pos)
                if s != " ":
                    break
                pos += k
        if pos >= n:
            return ""
        space = SPACE if self.escape_whitespaces else " "
        out: list[str] = [space] if self.add_dummy_prefix else []
        prev_space = rm
        while pos < n:
            s, k = self._prefix(data, pos)
            if prev_space:
                s = s.lstrip(" ")
            if s:
                out.append(s.replace(" ", space) if self.escape_whitespaces else s)
                prev_space = s.endswith(" ")
            pos += k
            if not rm:
                prev_space = False
        result = "".join(out)
        if rm:
            while result.endswith(space):
                result = result[: -len(space)]
        return result

    # ---- models ------------------------------------------------------------
    def encode(self, text: str, first: bool = True) -> list[int]:
        try:
            return self.native.encode(text)
        except UnicodeEncodeError:  # lone surrogates: the Python engine
            return self.encode_reference(text)

    def encode_batch(self, texts: list[str], num_threads: int | None) -> list[list[int]]:
        try:
            return self.native.encode_batch(texts, num_threads)
        except UnicodeEncodeError:
            return [self.encode(t) for t in texts]

    def encode_reference(self, text: str) -> list[int]:
        """:meth:`encode` in Python: :meth:`normalize_reference`, then the model
        (the slow reference of the Rust engine)."""
        if not text:
            return []
        norm = self.normalize_reference(text)
        if not norm:
            return []
        ids = self._cache.get(norm)
        if ids is None:
            ids = self._encode_normalized(norm)
            if len(norm) <= 256 and len(self._cache) < 100_000:
                self._cache[norm] = ids
        return list(ids)

    def _symbols_of(self, norm: str) -> list[tuple[str, bool]]:
        """The text cut into user-defined symbols (frozen) and characters."""
        if not self.matcher.lengths:
            return [(c, False) for c in norm]
        data = norm.encode("utf-8")
        out = []
        pos = 0
        while pos < len(data):
            k = self.matcher.match(data, pos)
            frozen = k > 0
            if not k:
                k = _one_char_len(data[pos])
            out.append((data[pos : pos + k].decode("utf-8"), frozen))
            pos += k
        return out

    def _encode_normalized(self, norm: str) -> list[int]:
        m = self.model
        if self.kind == "UNIGRAM":
            result = self._unigram(norm)
        elif self.kind == "BPE":
            result = self._bpe(norm)
        elif self.kind == "WORD":
            result = [(w, m.piece_to_id(w)) for w in _split_words(norm)]
        else:
            result = [(w, m.piece_to_id(w)) for w, _ in self._symbols_of(norm)]
        # unknown pieces: their bytes with byte_fallback, else one id per run (PopulateSentencePieceText)
        ids: list[int] = []
        prev_unk = False
        for w, i in result:
            unk = i == m.unk_id
            if unk and m.byte_fallback:
                ids.extend(m.byte_ids[b] for b in w.encode("utf-8", "surrogatepass"))
            elif not (unk and prev_unk):
                ids.append(i)
            prev_unk = unk
        return ids

    def _unigram(self, s: str) -> list[tuple[str, int]]:
        m = self.model
        types, scores, max_score = m.types, m.scores, m.max_score
        unk_score = f32(m.min_score - 10.0)

        def score_of(pid: int, length: int, here: float) -> float | None:
            t = types[pid]
            if t == UNUSED:
                return None
            if t == USER_DEFINED:
                return (f32(length * max_score) - 0.1) + here  # in double, as sentencepiece's `auto score`
            return f32(scores[pid] + here)

        path = best_path(s, m.trie, score_of, m.unk_id, lambda here: f32(unk_score + here), f32)
        return [(s[a:e], i) for a, e, i in path]

    def _bpe(self, s: str) -> list[tuple[str, int]]:
        m = self.model
        normal, scores, types = m.normal, m.scores, m.types
        syms = self._symbols_of(s)
        pieces = [p for p, _ in syms]
        frozen = [f for _, f in syms]
        rev: dict[str, tuple[str, str]] = {}
        # The agenda of sentencepiece's bpe_model.cc: the adjacent pair whose
        # joined text is a piece of highest score first, leftmost on ties; an
        # entry is stale when either side has changed since it was pushed (its
        # size no longer adds up). A heap over a linked list: O(n log n) for a
        # text of n symbols. An unused piece's parts are remembered when its
        # pair is pushed (as there), to split it back below.
        n = len(pieces)
        nxt = list(range(1, n + 1))
        prv = list(range(-1, n - 1))
        heap: list[tuple[float, int, int, int]] = []

        def push(left: int, right: int) -> None:
            if left < 0 or right >= n or frozen[left] or frozen[right]:
                return
            joined = pieces[left] + pieces[right]
            pid = normal.get(joined)
            if pid is None:
                return
            heapq.heappush(heap, (-scores[pid], left, right, len(joined)))
            if types[pid] == UNUSED:
                rev[joined] = (pieces[left], pieces[right])

        for j in range(n - 1):
            push(j, j + 1)
        while heap:
            _, left, right, size = heapq.heappop(heap)
            if not pieces[left] or not pieces[right] or len(pieces[left]) + len(pieces[right]) != size:
                continue
            pieces[left] += pieces[right]
            nxt[left] = nxt[right]
            if nxt[right] < n:
                prv[nxt[right]] = left
            pieces[right] = ""
            push(prv[left], left)
            push(left, nxt[left])
        pieces = [p for p in pieces if p]
        out: list[tuple[str, int]] = []

        def resegment(w: str) -> None:
            stack = [w]
            while stack:
                x = stack.pop()
                i = m.piece_to_id(x)
                if types[i] != UNUSED or x not in rev:
                    out.append((x, i))
                else:
                    left, right = rev[x]
                    stack.append(right)
                    stack.append(left)

        for p in pieces:
            resegment(p)
        return out

    # ---- decoding ----------------------------------------------------------
    def decode_ids(self, ids: list[int], names: dict[int, str]) -> str:
        m = self.model
        text: list[str] = []
        pending = bytearray()
        bos_ws_seen = False
        is_bos_ws = True  # once false, false for the rest of the text
        empty = True

        def flush() -> None:
            nonlocal empty
            data = bytes(pending)
            pos = 0
            while pos < len(data):
                k = _valid_utf8_len(data, pos)
                if k == 0:
                    text.append("\ufffd")
                    k = 1
                else:
                    text.append(data[pos : pos + k].decode("utf-8"))
                pos += k
            if data:
                empty = False
            pending.clear()

        for i in ids:
            t = m.types[i]
            if t == BYTE:
                pending.append(_byte_of(m.pieces[i]))
                continue
            flush()
            if bos_ws_seen or not empty:
                is_bos_ws = False
            piece = m.pieces[i]
            assert piece is not None
            if t == CONTROL:
                decoded, bos_ws_seen = "", False
            elif t == UNKNOWN:
                decoded, bos_ws_seen = self.unk_surface, False
            else:
                has = False
                if is_bos_ws and (self.add_dummy_prefix or self.remove_extra_whitespaces):
                    if piece.startswith(SPACE):
                        piece = piece[1:]
                        has = True
                    if self.remove_extra_whitespaces:
                        has = False
                decoded, bos_ws_seen = piece.replace(SPACE, " "), has
            if decoded:
                text.append(decoded)
                empty = False
        flush()
        return "".join(text)

    def id_bytes(self, i: int) -> bytes | None:
        m = self.model
        t = m.types[i]
        if t == BYTE:
            return bytes([_byte_of(m.pieces[i])])
        if t == CONTROL:
            return b""
        if t == UNKNOWN:
            return self.unk_surface.encode("utf-8")
        return m.pieces[i].replace(SPACE, " ").encode("utf-8")


def _split_words(text: str) -> list[str]:
    """SplitIntoWords (whitespace as prefix): a word starts at the text's start and at every U+2581."""
    out: list[str] = []
    for k, c in enumerate(text):
        if k == 0 or c == SPACE:
            out.append(c)
        else:
            out[-1] += c
    return out


def build_spm(d: Desc) -> SpmPipeline:
    return SpmPipeline(d)
