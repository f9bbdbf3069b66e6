"""Pretrained tokenizers by name, offline: ``tokenforge.load("cl100k_base")``.

The one lookup: :data:`NAMED` maps a name to the installed package that ships
its rank file, the file inside that package, its split pattern and its special
tokens. The package is found without importing it
(``importlib.util.find_spec``), the file is read from its directory, and nothing
is ever downloaded. A known name whose package is not installed, or a name no
installed package ships (``gpt2``, ``r50k_base``, ``p50k_base``: tiktoken
downloads those at run time), is a :class:`~tokenforge.errors.TokenforgeError`
saying what to install or to pass a file instead.

The rank file is read as any ``.tiktoken`` file (:mod:`.tiktoken_io`, merges
recovered from the ranks), so the tokenizer gives tiktoken's ids for that
encoding.

Not handled: names of Hugging Face Hub repositories (they need a download);
``.tiktoken`` files elsewhere on disk (pass their path, and the pattern).
"""

from __future__ import annotations

import gzip
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from ..errors import TokenforgeError
from .bpe_data import BPEData
from .patterns import CL100K_PATTERN, O200K_PATTERN

__all__ = ["NAMED", "is_named", "named_data", "installed"]

#: the largest decompressed rank file read (o200k_base is 3.6 MB)
MAX_RANK_BYTES = 64 << 20


@dataclass(frozen=True)
class Named:
    package: str  # the PyPI name to install
    module: str  # the importable package that holds the file
    file: str  # relative to the package directory, gzip-compressed .tiktoken
    pattern: str
    special_tokens: dict


NAMED: dict[str, Named] = {
    "cl100k_base": Named(
        "bpe-openai",
        "bpe_openai",
        "data/cl100k_base.tiktoken.gz",
        CL100K_PATTERN,
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
    "o200k_base": Named(
        "bpe-openai",
        "bpe_openai",
        "data/o200k_base.tiktoken.gz",
        O200K_PATTERN,
        {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    ),
}

#: names users know that no offline package ships (tiktoken downloads them)
NOT_SHIPPED = ("gpt2", "r50k_base", "p50k_base", "p50k_edit")


def is_named(name: str) -> bool:
    """A name this lookup answers (with a tokenizer or with an error saying what to install)."""
    return name in NAMED or name in NOT_SHIPPED


def installed() -> list[str]:
    """The names in :data:`NAMED` whose package is installed (found, not imported)."""
    return [name for name, entry in NAMED.items() if importlib.util.find_spec(entry.module) is not None]


def named_data(name: str) -> BPEData:
    """The BPE vocabulary of a named encoding, from the package that ships it."""
    from .tiktoken_io import _parse_tiktoken_lines, _read_fast, data_from_ranks

    if name in NOT_SHIPPED:
        raise TokenforgeError(
            f"no installed package ships the {name!r} rank file (tiktoken downloads it at run time); pass the path "
            f"of a .tiktoken file instead. Known names: {', '.join(NAMED)}"
        )
    entry = NAMED[name]
    spec = importlib.util.find_spec(entry.module)
    if spec is None or not spec.submodule_search_locations:
        raise TokenforgeError(
            f"{name!r} comes from the {entry.package} package, which is not installed: pip install {entry.package}"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / entry.file
    if not path.is_file():
        raise TokenforgeError(f"{entry.package} is installed but has no {entry.file}; reinstall or upgrade it")
    with gzip.open(path, "rb") as f:
        raw = f.read(MAX_RANK_BYTES + 1)
    if len(raw) > MAX_RANK_BYTES:
        raise TokenforgeError(f"{path}: more than {MAX_RANK_BYTES} bytes once decompressed; not a rank file")
    data = _read_fast(raw, entry.pattern, entry.special_tokens)  # the engine's one-pass reader
    if data is not None:
        return data
    ranks, _ = _parse_tiktoken_lines(path, raw)
    return data_from_ranks(ranks, entry.pattern, entry.special_tokens)
