"""Hypothesis strategies and small helpers shared by the BPE format tests."""

from __future__ import annotations

from hypothesis import strategies as st

from tokenforge.formats.bpe_data import BPEData
from tokenforge.formats.patterns import GPT2_PATTERN, GPT4_PATTERN, pattern_name_for

#: bytes that merges are built from, so that merges nest deeply and test texts hit them
ALPHABET = "ab c\n"
PATTERNS = (None, GPT2_PATTERN, GPT4_PATTERN, r"\S+|\s+")
SPECIAL_TEXT = st.from_regex(r"<\|[a-z_]{1,8}\|>", fullmatch=True)
ANY_SPECIAL_TEXT = st.text(min_size=1, max_size=12)


@st.composite
def bpe_data(draw, unique_bytes=True, max_merges=40, specials=SPECIAL_TEXT, patterns=PATTERNS, layouts=None):
    """A valid BPEData with merges over ALPHABET's bytes.

    layouts: "nanochat" (bytes 0..255, merges, specials after), "seed" (bytes,
    specials, merges), "offset" (ids 0..9 free for specials, byte b at b+10),
    "permuted" (bytes at shuffled ids); merge ids may have gaps.
    """
    layout = draw(st.sampled_from(layouts or ("nanochat", "seed", "offset", "permuted")))
    texts = draw(st.lists(specials, max_size=4, unique=True))
    if layout == "offset":
        byte_ids = [b + 10 for b in range(256)]
    elif layout == "permuted":
        byte_ids = list(draw(st.permutations(range(256))))
    else:
        byte_ids = list(range(256))
    special_ids: dict[str, int] = {}
    next_id = 256 if layout != "offset" else 266
    if layout == "seed":
        for t in texts:
            special_ids[t] = next_id
            next_id += 1
    elif layout == "offset":
        special_ids = {t: k for k, t in enumerate(texts)}
    token_bytes = {byte_ids[b]: bytes([b]) for b in range(256)}
    pool = [byte_ids[b] for b in ALPHABET.encode()]
    seen = set(token_bytes.values())
    merges = []
    for _ in range(draw(st.integers(0, max_merges))):
        a, b = draw(st.sampled_from(pool)), draw(st.sampled_from(pool))
        whole = token_bytes[a] + token_bytes[b]
        if unique_bytes and whole in seen:
            continue
        new = next_id + draw(st.sampled_from((0, 0, 0, 0, 1, 7)))
        next_id = new + 1
        seen.add(whole)
        token_bytes[new] = whole
        merges.append((a, b, new))
        pool.append(new)
    if layout in ("nanochat", "permuted"):
        for t in texts:
            special_ids[t] = next_id
            next_id += 1
    pattern = draw(st.sampled_from(patterns))
    values = st.integers() | st.text(max_size=5) | st.booleans()
    training = draw(st.dictionaries(st.text(max_size=5), values, max_size=3))
    return BPEData(byte_ids, merges, special_ids, pattern, pattern_name_for(pattern), training)


def same_vocabulary(a: BPEData, b: BPEData) -> bool:
    """Same ids for the same bytes and specials, and same pattern (merges may differ)."""
    return (
        a.token_bytes_list() == b.token_bytes_list()
        and a.special_tokens == b.special_tokens
        and a.pattern == b.pattern
        and list(a.byte_ids) == list(b.byte_ids)
    )


def canonical(data: BPEData) -> BPEData:
    """``data`` with every merge replaced by the split tiktoken recovers (data_from_ranks)."""
    from tokenforge.formats.tiktoken_io import data_from_ranks, mergeable_ranks

    return data_from_ranks(mergeable_ranks(data), data.pattern, data.special_tokens)


class HalfWriteFile:
    """A file object that writes half of what it is given, then fails (a full disk)."""

    def __init__(self, real):
        self.real = real

    def write(self, data):
        self.real.write(data[: len(data) // 2])
        raise OSError(28, "No space left on device (simulated)")

    def __getattr__(self, name):
        return getattr(self.real, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.real.close()
        return False


def fail_writes_halfway(monkeypatch, nth: int | None = None) -> list[int]:
    """Make atomic writes (tokenforge.formats.atomic) fail after writing half their
    data: every file's, or only the ``nth`` file opened from now on (1-based; the
    disk fills while a save of several files is written). Returns the list that
    grows by one entry per file opened, for tests to count them."""
    import os

    from tokenforge.formats import atomic

    opened: list[int] = []

    class OsProxy:
        def __getattr__(self, name):
            return getattr(os, name)

        @staticmethod
        def fdopen(*args, **kwargs):
            opened.append(1)
            f = os.fdopen(*args, **kwargs)
            return HalfWriteFile(f) if nth is None or len(opened) == nth else f

    monkeypatch.setattr(atomic, "os", OsProxy())
    return opened
