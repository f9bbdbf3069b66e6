"""Tokenizers the pipeline tests train themselves with the reference libraries.

Each ``HF_CONFIGS`` entry builds a ``tokenizers.Tokenizer`` and its trainer;
each ``SPM_CONFIGS`` entry is sentencepiece's trainer settings. :func:`hf_pair`
and :func:`spm_pair` train one on the tiny corpus (cached per process), save it in
``directory`` (a test's tmp directory) and return the reference object,
tokenforge's import of the saved file and its path. Small
vocabularies: a training takes well under a second.

Not handled: large vocabularies or corpora (bench/imported.py does those).
"""

from __future__ import annotations

import io
from pathlib import Path

import tokenforge
from tiny_corpus import TINY_DOCS

BYTES = [f"<0x{b:02X}>" for b in range(256)]


def _hf(kind: str):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    if kind in ("unigram-always", "unigram-first", "unigram-never"):
        scheme = kind.split("-")[1]
        t = Tokenizer(models.Unigram())
        t.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme=scheme)
        t.decoder = decoders.Metaspace(prepend_scheme=scheme)
        return t, trainers.UnigramTrainer(vocab_size=400, special_tokens=["<unk>", "<s>"], unk_token="<unk>")
    if kind == "unigram-nfkc-bytes":
        t = Tokenizer(models.Unigram(byte_fallback=True))
        t.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
        t.pre_tokenizer = pre_tokenizers.Metaspace(split=False)
        t.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace()])
        return t, trainers.UnigramTrainer(vocab_size=700, special_tokens=["<unk>", *BYTES], unk_token="<unk>")
    if kind == "wordpiece-bert":
        t = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        t.normalizer = normalizers.BertNormalizer()
        t.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        t.decoder = decoders.WordPiece()
        return t, trainers.WordPieceTrainer(vocab_size=500, special_tokens=["[UNK]", "[CLS]", "[SEP]"])
    if kind == "wordpiece-whitespace":
        t = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=12))
        t.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(), normalizers.Strip()])
        t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace(), pre_tokenizers.Digits(True)])
        t.decoder = decoders.WordPiece(cleanup=False)
        return t, trainers.WordPieceTrainer(vocab_size=400, special_tokens=["[UNK]"])
    if kind == "wordlevel":
        t = Tokenizer(models.WordLevel(unk_token="[UNK]"))
        t.normalizer = normalizers.NFC()
        t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
        return t, trainers.WordLevelTrainer(vocab_size=300, special_tokens=["[UNK]"])
    if kind == "bpe-llama":
        t = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
        t.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
        t.decoder = decoders.Sequence(
            [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
        )
        return t, trainers.BpeTrainer(vocab_size=500, special_tokens=["<unk>", "<s>", "</s>", *BYTES])
    if kind == "bpe-metaspace-first":
        t = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, ignore_merges=True))
        t.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first", split=False)
        t.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace(prepend_scheme="first")])
        return t, trainers.BpeTrainer(vocab_size=500, special_tokens=["<unk>", "<s>", *BYTES])
    if kind == "bpe-bytelevel-prefix":
        t = Tokenizer(models.BPE())
        t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
        t.decoder = decoders.ByteLevel()
        return t, trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    raise KeyError(kind)


#: tokenizer.json files converted from a SentencePiece model the test trains, with
#: the model's precompiled charsmap as a ``Precompiled`` normalizer (T5, ALBERT, XLNet,
#: mBART files): the normalization rule, and the rest of the pipeline as
#: transformers' (v4) SpmConverter wrote it or as the file has only the charsmap
SPM_CONVERTED = {
    "unigram-precompiled-t5": "nmt_nfkc",
    "unigram-precompiled-cf": "nmt_nfkc_cf",
}


def _converted(kind: str):
    """A tokenizers.Tokenizer made from a trained SentencePiece unigram model."""
    import sentencepiece as spm

    from spm_convert import converted_tokenizer

    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(TINY_DOCS),
        model_writer=out,
        minloglevel=2,
        model_type="unigram",
        vocab_size=300,
        normalization_rule_name=SPM_CONVERTED[kind],
    )
    return converted_tokenizer(out.getvalue(), t5=kind == "unigram-precompiled-t5")


HF_CONFIGS = [
    "unigram-always",
    "unigram-first",
    "unigram-never",
    "unigram-nfkc-bytes",
    "wordpiece-bert",
    "wordpiece-whitespace",
    "wordlevel",
    "bpe-llama",
    "bpe-metaspace-first",
    "bpe-bytelevel-prefix",
    *SPM_CONVERTED,
]

SPM_CONFIGS = {
    "unigram": dict(model_type="unigram", vocab_size=300),
    "unigram-bytes": dict(model_type="unigram", vocab_size=500, byte_fallback=True),
    "unigram-identity": dict(model_type="unigram", vocab_size=300, normalization_rule_name="identity"),
    "unigram-nfkc-cf": dict(model_type="unigram", vocab_size=300, normalization_rule_name="nmt_nfkc_cf"),
    "unigram-symbols": dict(
        model_type="unigram", vocab_size=300, user_defined_symbols=["@@", "<br>"], control_symbols=["<ctl>"]
    ),
    "unigram-raw-spaces": dict(
        model_type="unigram", vocab_size=300, remove_extra_whitespaces=False, add_dummy_prefix=False
    ),
    "bpe": dict(model_type="bpe", vocab_size=300),
    "bpe-bytes": dict(model_type="bpe", vocab_size=500, byte_fallback=True, user_defined_symbols=["@@"]),
    "word": dict(model_type="word", vocab_size=200),
    "char": dict(model_type="char", vocab_size=100),
}

_cache: dict[str, tuple] = {}


def hf_pair(kind: str, directory: Path):
    """(trained tokenizers.Tokenizer, tokenforge's load of its tokenizer.json)."""
    key = f"hf:{kind}"
    if key not in _cache:
        if kind in SPM_CONVERTED:
            t = _converted(kind)
        else:
            t, trainer = _hf(kind)
            t.train_from_iterator(TINY_DOCS, trainer)
        path = directory / f"{kind}.json"
        t.save(str(path))
        # the reference is tokenizers reading the same file (its float parser can make a
        # Unigram score one ulp off the trained value: formats/hf_pipeline.serde_json_float)
        from tokenizers import Tokenizer

        _cache[key] = (Tokenizer.from_file(str(path)), tokenforge.load(path), path)
    return _cache[key]


def spm_pair(kind: str, directory: Path):
    """(trained SentencePieceProcessor, tokenforge's load of its .model file)."""
    import sentencepiece as spm

    key = f"spm:{kind}"
    if key not in _cache:
        out = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(TINY_DOCS), model_writer=out, minloglevel=2, **SPM_CONFIGS[kind]
        )
        path = directory / f"{kind}.model"
        path.write_bytes(out.getvalue())
        _cache[key] = (spm.SentencePieceProcessor(model_proto=out.getvalue()), tokenforge.load(path), path)
    return _cache[key]
