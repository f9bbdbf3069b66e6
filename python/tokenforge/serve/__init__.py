"""``tokenforge serve``: a local playground that shows how tokenizers cut text.

One page (``static/``: one HTML, one script, one stylesheet, shipped in the
package; nothing is loaded from outside the machine) and a small JSON API
(:mod:`tokenforge.serve.app`), on Starlette and uvicorn (the ``serve`` extra:
``pip install 'tokenforge[serve]'``). Give it tokenizer files of any family
(:func:`tokenforge.registry.load`), or nothing: it then trains a small
tokenizer of every family on the built-in corpus
(:func:`default_tokenizers`, the specs of ``tokenforge demo``'s comparison,
trained by :func:`tokenforge.eval.families.train_tokenizer`), and adds the GPT
tokenizers users compare against, ``cl100k_base`` and ``o200k_base``, when the
package that ships their rank files is installed (``bpe-openai``,
:mod:`tokenforge.formats.named`; read offline, never downloaded).

Not handled: reloading tokenizer files that change while it runs; more than
one process (the tokenizers live in this one).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Iterable

from ..errors import TokenforgeError
from ..eval.pieces import TokenInfo, piece_bytes, piece_of, text_encoding
from ..registry import DEMO_SPECS
from .app import DEFAULT_MAX_TEXT, body_limit, create_app

__all__ = [
    "create_app",
    "default_tokenizers",
    "load_tokenizers",
    "split_name",
    "DEFAULT_MAX_TEXT",
    "DEFAULT_SPECS",
    "body_limit",
    "TokenInfo",
    "piece_of",
    "piece_bytes",
    "text_encoding",
]

#: what the playground trains when it is given no files (tokenforge demo's families)
DEFAULT_SPECS = DEMO_SPECS
#: their vocabulary size (mixedgram's is fixed at 4,096) and the corpus bytes they learn from
DEFAULT_VOCAB_SIZE = 4096
DEFAULT_TRAIN_BYTES = 2_000_000


def default_tokenizers(
    specs: str = DEFAULT_SPECS,
    vocab_size: int = DEFAULT_VOCAB_SIZE,
    max_bytes: int = DEFAULT_TRAIN_BYTES,
    *,
    docs: list[str] | None = None,
    progress: Callable[[str], object] | None = None,
    named: bool = True,
) -> dict[str, Any]:
    """Train one tokenizer per spec on ``docs`` (default: the first ``max_bytes``
    of the built-in corpus); names are the specs' slugs (``bpe-4096``). With
    ``named``, then the installed named encodings (``cl100k_base``, ``o200k_base``:
    :func:`tokenforge.formats.named.installed`), under their names.
    ``progress(line)`` is called once per tokenizer."""
    from ..eval.families import parse_specs, train_tokenizer
    from ..formats.named import installed
    from ..registry import load

    if docs is None:
        from ..data.default_corpus import iter_default_corpus

        docs = list(iter_default_corpus(max_bytes=max_bytes))
    out: dict[str, Any] = {}
    parsed = parse_specs(specs)
    for k, spec in enumerate(parsed):
        size = None if spec.fixed_vocab else vocab_size
        if progress is not None:
            progress(f"training {spec.label(size)} ({k + 1}/{len(parsed)})")
        out[spec.slug(size)] = train_tokenizer(spec, docs, size)
    for name in installed() if named else []:
        if progress is not None:
            progress(f"loading {name} (installed)")
        out[name] = load(name)
    return out


def split_name(arg: str) -> tuple[str | None, Path]:
    """``NAME=PATH`` → (NAME, PATH); a bare path (or one that exists as given,
    ``=`` and all) → (None, PATH)."""
    if "=" in arg and not Path(arg).exists():
        name, path = arg.split("=", 1)
        if name:
            return name, Path(path)
    return None, Path(arg)


def load_tokenizers(args: Iterable[str | os.PathLike[str]]) -> dict[str, Any]:
    """Load tokenizer files or directories of any family, given as ``PATH`` or
    ``NAME=PATH``; a bare path is named by its file name (``name-2``, ``name-3``
    when two share one)."""
    from ..registry import load

    out: dict[str, Any] = {}
    for arg in args:
        name, p = split_name(str(arg))
        if name is None:
            base = (p.stem if p.is_file() else p.name) or "tokenizer"
            name, k = base, 1
            while name in out:
                k += 1
                name = f"{base}-{k}"
        elif name in out:
            raise TokenforgeError(f"two tokenizers are named {name!r}")
        out[name] = load(p)
    return out
