"""The plain, in-memory description of a byte-level BPE vocabulary.

Every BPE reader returns one and every writer takes one, so file formats never
need the Rust engine. Ids are the ids the tokenizer emits; ranks are ids (the
merge created later has the larger id), as in tiktoken.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import FormatError

__all__ = ["BPEData"]


@dataclass
class BPEData:
    """A byte-level BPE vocabulary.

    byte_ids:       256 ints, the id of each single byte b (nanochat: b; growing: b + 10).
    merges:         (left_id, right_id, new_id) in the order they were learned;
                    new_id strictly increasing.
    special_tokens: special token text -> id (ids not used by bytes or merges).
    pattern:        the pre-tokenization regex, or None (whole documents are sequences).
    pattern_name:   "gpt4", "gpt2", "custom" or "none".
    training:       free-form settings recorded at training time (JSON-serialisable).
    """

    byte_ids: list[int]
    merges: list[tuple[int, int, int]]
    special_tokens: dict[str, int] = field(default_factory=dict)
    pattern: str | None = None
    pattern_name: str = "custom"
    training: dict = field(default_factory=dict)

    @property
    def vocab_size(self) -> int:
        ids = list(self.byte_ids) + [m[2] for m in self.merges] + list(self.special_tokens.values())
        return max(ids) + 1 if ids else 0

    def token_bytes_list(self) -> list[bytes | None]:
        """Bytes of every id (None for special or unused ids)."""
        out: list[bytes | None] = [None] * self.vocab_size
        for b, i in enumerate(self.byte_ids):
            out[i] = bytes([b])
        for a, b, new in self.merges:
            out[new] = out[a] + out[b]
        return out

    def validate(self, path=None) -> None:
        """Raise FormatError if ids overlap, merges reference unknown/later ids, etc."""
        if len(self.byte_ids) != 256:
            raise FormatError(f"expected 256 byte ids, found {len(self.byte_ids)}", path=path)
        seen: dict[int, str] = {}
        for b, i in enumerate(self.byte_ids):
            if not isinstance(i, int) or i < 0:
                raise FormatError(f"byte {b} has invalid id {i!r}", path=path)
            if i in seen:
                raise FormatError(f"id {i} used twice ({seen[i]} and byte {b})", path=path)
            seen[i] = f"byte {b}"
        last = -1
        for k, (a, b, new) in enumerate(self.merges):
            for x in (a, b):
                if x not in seen or seen[x].startswith("special"):
                    raise FormatError(f"merge {k} ({a}, {b}) -> {new} references id {x} that is not defined before it", path=path)
            if new in seen:
                raise FormatError(f"merge {k} produces id {new}, already used by {seen[new]}", path=path)
            if new <= last:
                raise FormatError(f"merge {k} produces id {new}, not larger than the previous merge's {last}", path=path)
            last = new
            seen[new] = f"merge {k}"
        for text, i in self.special_tokens.items():
            if not isinstance(text, str) or not text:
                raise FormatError(f"special token {text!r} must be a non-empty string", path=path)
            if not isinstance(i, int) or i < 0:
                raise FormatError(f"special token {text!r} has invalid id {i!r}", path=path)
            if i in seen:
                raise FormatError(f"special token {text!r} has id {i}, already used by {seen[i]}", path=path)
            seen[i] = f"special {text!r}"
