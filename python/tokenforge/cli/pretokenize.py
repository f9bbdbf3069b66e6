"""``pretokenize_and_report``: the token shards of ``tokenforge pretokenize``
and ``tokenforge lz78 pretokenize``, with their one-line summary and what Ctrl-C
kept.

Not handled: anything but the summary; :func:`tokenforge.data.shards.pretokenize`
does the work.
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import TokenforgeError
from .kit import EXIT_INTERRUPTED

if TYPE_CHECKING:
    from ..base import Tokenizer


def pretokenize_and_report(corpus: object, tok: Tokenizer, out: Path, **kwargs: Any) -> int:
    """:func:`tokenforge.data.shards.pretokenize` with a one-line summary; on
    Ctrl-C, say what was kept (run again to resume) and exit 130."""
    from ..data.shards import INDEX_FILE, ShardSet, pretokenize

    t0 = time.perf_counter()
    try:
        shards = pretokenize(corpus, tok, out, **kwargs)
    except KeyboardInterrupt:
        kept = None
        if (out / INDEX_FILE).is_file():
            try:
                with warnings.catch_warnings():  # (unfinished, as this message says)
                    warnings.simplefilter("ignore")
                    kept = ShardSet(out, allow_incomplete=True)
            except (TokenforgeError, OSError):
                kept = None
        if kept is not None and kept.num_shards:
            print(
                f"interrupted; kept {kept.num_shards} finished shard(s) ({kept.num_tokens:,} tokens, "
                f"{kept.num_documents:,} documents) in {out}; run the same command again to resume",
                file=sys.stderr,
            )
        else:
            print(
                f"interrupted; no shard was finished (only {out / INDEX_FILE} records the settings); "
                "run the same command again to start",
                file=sys.stderr,
            )
        return EXIT_INTERRUPTED
    dt = time.perf_counter() - t0
    print(
        f"{shards.num_tokens:,} tokens from {shards.num_documents:,} documents in "
        f"{shards.num_shards} shards ({shards.dtype.name}) in {out} ({dt:.1f} s)"
    )
    return 0
