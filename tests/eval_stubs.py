"""Small pure-Python tokenizers for the evaluation tests.

:class:`DictTokenizer` has the LZ78 family's id layout (0 reserved, dictionary
codes 1..N from a seed-format TSV, byte fallback N+1+b, then <|bos|>, <|eos|>,
<|pad|>) and encodes by greedy longest match over UTF-8 bytes, so it produces
byte-fallback ids for anything outside its dictionary, including single bytes
of a multi-byte character. It offers ``embedding_metadata`` in the protocol of
:mod:`tokenforge.embedding_meta`; with ``flat=True`` it says it is a flat
dictionary, as flat_prune's does. Written for clarity, not speed.
"""

from __future__ import annotations

import json

import numpy as np

from tokenforge.base import Tokenizer
from tokenforge.formats.atomic import atomic_write

#: the seed's TSV example, plus a few entries
SEED_TSV = """\
1\t0\th\th
2\t0\te\te
3\t1\te\the
4\t3\tl\thel
5\t4\tl\thell
6\t5\to\thello
7\t0\t \t 
8\t7\tw\t w
9\t0\tl\tl
10\t9\to\tlo
11\t2\tx\tex
"""

SPECIALS = ("<|bos|>", "<|eos|>", "<|pad|>")


def parse_tsv(text: str) -> list[tuple[int, int, str, str]]:
    rows = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        code, parent, char, pattern = line.split("\t")
        rows.append((int(code), int(parent), char, pattern))
    return rows


class DictTokenizer(Tokenizer):
    family = "stub-dict"

    def __init__(self, tsv: str = SEED_TSV, *, flat: bool = False, extra_vocab: int = 0):
        self.rows = parse_tsv(tsv)
        self.flat = flat
        self.n = len(self.rows)
        self.patterns = [r[3].encode("utf-8") for r in self.rows]  # code i -> patterns[i - 1]
        self.by_bytes = {p: i + 1 for i, p in enumerate(self.patterns)}
        self.max_len = max(len(p) for p in self.patterns)
        self._specials = {s: self.n + 257 + k for k, s in enumerate(SPECIALS)}
        self._vocab = self.n + 260 + extra_vocab  # extra_vocab: unused ids (to test wide dtypes)

    # ---- contract ---------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return self._vocab

    @property
    def special_tokens(self) -> dict[str, int]:
        return dict(self._specials)

    def encode_ordinary(self, text: str) -> list[int]:
        data = text.encode("utf-8")
        out, i = [], 0
        while i < len(data):
            for L in range(min(self.max_len, len(data) - i), 0, -1):
                code = self.by_bytes.get(data[i : i + L])
                if code is not None:
                    out.append(code)
                    i += L
                    break
            else:
                out.append(self.n + 1 + data[i])
                i += 1
        return out

    def id_to_bytes(self, id: int) -> bytes:
        id = self.check_id(id)
        if 1 <= id <= self.n:
            return self.patterns[id - 1]
        if self.n < id <= self.n + 256:
            return bytes([id - self.n - 1])
        for s, i in self._specials.items():
            if i == id:
                return s.encode()
        return b""

    def decode_bytes(self, ids) -> bytes:
        return b"".join(self.id_to_bytes(int(i)) for i in ids)

    def token_bytes(self) -> np.ndarray:
        tb = np.zeros(self._vocab, dtype=np.int32)
        for i, p in enumerate(self.patterns):
            tb[i + 1] = len(p)
        tb[self.n + 1 : self.n + 257] = 1
        return tb

    def save(self, path) -> None:
        atomic_write(path, json.dumps({"rows": self.rows, "flat": self.flat, "vocab": self._vocab}))

    # ---- embedding metadata -------------------------------------------------
    def char_table(self) -> list[str]:
        return sorted({r[2] for r in self.rows})

    def embedding_metadata(self, mode: str) -> dict:
        if self.flat:
            return {"flat": True}
        chars = self.char_table()
        cidx = {c: k for k, c in enumerate(chars)}
        C = len(chars)
        parent = np.zeros(self._vocab, dtype=np.int64)
        char = np.zeros(self._vocab, dtype=np.int64)
        code_of = {r[3]: r[0] for r in self.rows}
        for code, par, ch, pattern in self.rows:
            if mode == "structured":
                parent[code] = par
            elif mode == "hierarchical":
                parent[code] = next(
                    (code_of[pattern[:k]] for k in range(len(pattern) - 1, 0, -1) if pattern[:k] in code_of), 0
                )
            else:
                raise ValueError(mode)
            char[code] = cidx[ch]
        for b in range(256):
            char[self.n + 1 + b] = C + b
        for k in range(3):
            char[self.n + 257 + k] = C + 256 + k
        for k in range(self.n + 260, self._vocab):
            char[k] = C + 259
        return {"parent": parent, "char": char, "num_chars": C + 260}


class FlatOnly(Tokenizer):
    """A tokenizer with no structure at all (no metadata, no merges)."""

    family = "stub-flat"

    def __init__(self):
        self.inner = DictTokenizer()

    vocab_size = property(lambda self: self.inner.vocab_size)
    special_tokens = property(lambda self: self.inner.special_tokens)

    def encode_ordinary(self, text):
        return self.inner.encode_ordinary(text)

    def decode_bytes(self, ids):
        return self.inner.decode_bytes(ids)

    def token_bytes(self):
        return self.inner.token_bytes()

    def id_to_bytes(self, id):
        return self.inner.id_to_bytes(id)

    def save(self, path):
        self.inner.save(path)
