"""A SentencePiece unigram model as a tokenizer.json with a ``Precompiled``
normalizer, built with ``tokenizers``' own classes the way transformers' (v4)
``SpmConverter`` built T5's and ALBERT's files: the model's pieces and scores,
its precompiled charsmap, Metaspace (``always``). Used by the pipeline parity
tests, the fuzz corpus (tests/fuzz_formats.py) and bench/imported.py.

Not handled: byte fallback, user-defined symbols, other model types.
"""

from __future__ import annotations


def converted_tokenizer(model_proto: bytes, t5: bool = True):
    """A ``tokenizers.Tokenizer`` of a unigram ``.model``'s bytes. ``t5``: the
    normalizer is ``Sequence[Precompiled, Strip(right), Replace(" {2,}", "▁")]``
    and the pre-tokenizer Metaspace; else Precompiled alone, WhitespaceSplit then
    Metaspace. Control pieces become special added tokens."""
    import base64

    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

    from tokenforge.formats.sentencepiece_model import parse_model_proto

    desc = parse_model_proto(model_proto, "<converted>")
    pieces = desc["model"]["pieces"]
    unk = next(i for i, (_, _, t) in enumerate(pieces) if t == 2)
    t = Tokenizer(models.Unigram([(p, score) for p, score, _ in pieces], unk, False))
    charsmap = normalizers.Precompiled(base64.b64decode(desc["normalizer"]["precompiled_charsmap"]))
    if t5:
        t.normalizer = normalizers.Sequence(
            [charsmap, normalizers.Strip(left=False, right=True), normalizers.Replace(Regex(" {2,}"), "\u2581")]
        )
        t.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="always")
    else:
        t.normalizer = charsmap
        t.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Metaspace(prepend_scheme="always")]
        )
    t.decoder = decoders.Metaspace(prepend_scheme="always")
    t.add_special_tokens([p for p, _, ty in pieces if ty == 3])
    return t
