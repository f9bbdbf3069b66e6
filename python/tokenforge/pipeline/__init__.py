"""``PipelineTokenizer``: the tokenizers users already have (the ``pipeline`` family).

A Hugging Face ``tokenizer.json`` of any model type (BPE, Unigram, WordPiece,
WordLevel) or a SentencePiece ``.model`` file comes in as a pipeline --
normalizer, pre-tokenizer, model, decoder -- whose ids are the reference
library's on every text: ``tokenizers``' ``encode(text, add_special_tokens=False)``
and sentencepiece's ``encode``; ``decode`` gives what their ``decode`` gives
(``tokenizers``' with ``skip_special_tokens=False``). The stages and their rules
are :mod:`tokenforge.pipeline.steps` (tokenizer.json) and
:mod:`tokenforge.pipeline.spm` (SentencePiece); the readers are
:mod:`tokenforge.formats.hf_pipeline` and :mod:`tokenforge.formats.sentencepiece_model`,
and ``save`` writes our own versioned, checksummed ``tokenforge-pipeline`` JSON
(:mod:`tokenforge.formats.pipeline_json`) holding the same description.

Special tokens: a tokenizer.json's added tokens marked ``special`` (and a
SentencePiece model's control symbols) are this tokenizer's
:attr:`special_tokens`. As everywhere in tokenforge, their text in ``encode``'s
input stays text unless allowed: ``encode(text)`` equals ``tokenizers`` with
``encode_special_tokens = True``, and ``encode(text, allowed_special="all")``
equals its default, which cuts the text at every special token.

``token_bytes()`` / ``id_to_bytes(id)``: the bytes a token stands for in running
text, through the decoder's per-token rules (``▁`` as a space, ``<0x41>`` as
byte 0x41, ByteLevel characters as their bytes, a WordPiece ``##`` prefix
dropped); a special token's text.

The engine: a SentencePiece model's encoding (normalizer and model, every
model type) and a tokenizer.json's Unigram and WordPiece model run in Rust
(``tokenforge._core``), ``encode_batch`` on ``num_threads`` threads with the
GIL released; tokenizer.json normalizers and pre-tokenizers, symbol BPE and
decoding run in Python, text by text. Text
holding lone surrogates (which the Rust engine cannot take) is encoded by the
Python loops, the engines' slow reference.

Not handled: ``decode(encode(s)) == s`` holds only where the reference's does
(normalization, an unknown token, WordPiece's spaces and lower-casing lose
text); post-processors (``TemplateProcessing`` ...) are kept in the file but
never applied, as with ``add_special_tokens=False``; truncation and padding
settings are refused; non-special added tokens, and special ones with
``lstrip``/``rstrip``/``single_word``/``normalized``, are refused at load.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, NoReturn, Sequence

from ..base import SpecialArg, Tokenizer, special_stretches
from ..errors import TokenforgeError
from ..ids import IdBatch, check_text, check_texts, flat_ids
from ..surrogates import decode_utf8
from .steps import Desc, build

if TYPE_CHECKING:
    import numpy as np

    from ..formats.kinds import Format

__all__ = ["PipelineTokenizer", "ALGORITHMS", "TRAIN_SETTINGS", "trained_algorithm", "file_formats", "token_detail"]

#: what :meth:`PipelineTokenizer.train` trains, and with which library
ALGORITHMS = {
    "spm_unigram": "sentencepiece",
    "spm_bpe": "sentencepiece",
    "hf_wordpiece": "tokenizers",
    "hf_unigram": "tokenizers",
}


#: how :meth:`PipelineTokenizer.train` calls each library (compare's report shows it)
TRAIN_SETTINGS = {
    "spm_unigram": "SentencePieceTrainer.train(model_type=unigram, vocab_size=N, hard_vocab_limit=false, "
    "max_sentence_length=65536) on the documents' non-empty lines; defaults otherwise (nmt_nfkc normalization, "
    "character_coverage 0.9995, no byte fallback, split_digits false)",
    "spm_bpe": "SentencePieceTrainer.train(model_type=bpe, vocab_size=N, hard_vocab_limit=false, "
    "max_sentence_length=65536) on the documents' non-empty lines; defaults otherwise (nmt_nfkc normalization, "
    "character_coverage 0.9995, no byte fallback, split_digits false)",
    "hf_wordpiece": "WordPiece(unk_token=[UNK]) with BertNormalizer, BertPreTokenizer, WordPiece decoder; "
    "WordPieceTrainer(vocab_size=N, special_tokens=[[UNK], [CLS], [SEP]])",
    "hf_unigram": "Unigram() with Metaspace pre-tokenizer and decoder; "
    "UnigramTrainer(vocab_size=N, special_tokens=[<unk>, <s>, </s>], unk_token=<unk>)",
}


def trained_algorithm(tok: "PipelineTokenizer") -> str | None:
    """Which of :data:`ALGORITHMS` a tokenizer is, by its model (None: another pipeline)."""
    kind = tok.inspect_extra()["model"]
    if tok.source == "sentencepiece":
        return {"UNIGRAM": "spm_unigram", "BPE": "spm_bpe"}.get(kind)
    return {"WordPiece": "hf_wordpiece", "Unigram": "hf_unigram"}.get(kind)


def _need(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise TokenforgeError(f"training this tokenizer needs the {module} package: pip install {module}") from None


def _train(docs: list[str], vocab_size: int, algorithm: str, num_threads: int | None) -> "PipelineTokenizer":
    if algorithm not in ALGORITHMS:
        raise TokenforgeError(f"unknown algorithm {algorithm!r}; known: {', '.join(ALGORITHMS)}")
    if ALGORITHMS[algorithm] == "sentencepiece":
        import io

        spm = _need("sentencepiece")
        from ..formats.sentencepiece_model import parse_model_proto

        out = io.BytesIO()
        # sentencepiece reads sentences (lines) and skips, without a word, every one
        # longer than max_sentence_length (4,192 bytes by default): whole documents
        # would leave it most of the text, so it gets their non-empty lines
        spm.SentencePieceTrainer.train(
            sentence_iterator=(line for d in docs for line in d.split("\n") if line.strip()),
            model_writer=out,
            vocab_size=vocab_size,
            model_type=algorithm[4:],
            hard_vocab_limit=False,
            max_sentence_length=1 << 16,
            minloglevel=2,
            num_threads=num_threads or 1,
        )
        return PipelineTokenizer(parse_model_proto(out.getvalue(), "<trained>"), "sentencepiece")
    import json

    tk = _need("tokenizers")
    if algorithm == "hf_wordpiece":
        t = tk.Tokenizer(tk.models.WordPiece(unk_token="[UNK]"))
        t.normalizer = tk.normalizers.BertNormalizer()
        t.pre_tokenizer = tk.pre_tokenizers.BertPreTokenizer()
        t.decoder = tk.decoders.WordPiece()
        trainer = tk.trainers.WordPieceTrainer(
            vocab_size=vocab_size, special_tokens=["[UNK]", "[CLS]", "[SEP]"], show_progress=False
        )
    else:
        t = tk.Tokenizer(tk.models.Unigram())
        t.pre_tokenizer = tk.pre_tokenizers.Metaspace()
        t.decoder = tk.decoders.Metaspace()
        trainer = tk.trainers.UnigramTrainer(
            vocab_size=vocab_size, special_tokens=["<unk>", "<s>", "</s>"], unk_token="<unk>", show_progress=False
        )
    t.train_from_iterator(docs, trainer)
    from ..formats.hf_pipeline import PIPELINE_KEYS

    value = json.loads(t.to_str())
    return PipelineTokenizer({k: value[k] for k in PIPELINE_KEYS if k in value}, "huggingface")


def _added_tokens(desc: Desc) -> dict[str, int]:
    """The special added tokens (content -> id); anything this engine would not reproduce is refused."""
    if not isinstance(desc.value, dict) or desc.value.get("added_tokens") is None:
        return {}
    specials: dict[str, int] = {}
    for tok in desc.items("added_tokens"):
        content = tok.get("content", str)
        i = tok.get("id", int)
        if not 0 <= i < 1 << 31:
            raise tok.fail(f"id {i} is out of range", "id")
        if not content:
            raise tok.fail("an empty added token", "content")
        if not tok.get("special", bool, False):
            raise tok.fail(f"the non-special added token {content!r} is not supported (it is matched in text)")
        for flag in ("lstrip", "rstrip", "single_word", "normalized"):
            if tok.get(flag, bool, False):
                raise tok.fail(f"added token {content!r} with {flag} true is not supported", flag)
        if content in specials and specials[content] != i:
            raise tok.fail(f"{content!r} is added twice, with ids {specials[content]} and {i}")
        specials[content] = i
    return specials


class PipelineTokenizer(Tokenizer):
    """An imported tokenizer: a tokenizer.json or SentencePiece model, with the reference's ids.

    Made by :func:`tokenforge.load` (or :meth:`from_description`); ``source``
    says what it was read from (``"huggingface"`` or ``"sentencepiece"``)."""

    family = "pipeline"

    def __init__(self, description: dict, source: str, origin: str | os.PathLike[str] | None = None) -> None:
        if source not in ("huggingface", "sentencepiece"):
            raise TokenforgeError(f"unknown pipeline source {source!r}")
        desc = Desc(description, "", origin)
        if not isinstance(description, dict):
            raise desc.fail("expected an object")
        self._description = description
        self.source = source
        self._pipe: Any
        if source == "sentencepiece":
            from .spm import build_spm

            self._pipe = build_spm(desc)
            self._specials = dict(self._pipe.specials)
        else:
            for key in ("truncation", "padding"):
                if description.get(key) is not None:
                    raise desc.fail(f"{key} is set; tokenforge encodes whole texts, so it is not supported", key)
            self._pipe = build(desc)
            self._specials = _added_tokens(desc)
        pieces = self._pipe.model.pieces
        self._names: dict[int, str] = {i: t for t, i in self._specials.items()}
        self._spelling: list[bytes] | None = None  # id -> bytes, made by the first normalize()
        self._vocab_size = max([len(pieces), *(i + 1 for i in self._names)])
        if self._vocab_size > 1 << 31:
            raise desc.fail(f"{self._vocab_size} ids is more than tokenforge supports")

    # ---- the contract ---------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    @property
    def special_tokens(self) -> dict[str, int]:
        return dict(self._specials)

    def encode_ordinary(self, text: str) -> list[int]:
        check_text(text)
        return self._pipe.encode(text, True)

    def encode_batch(
        self, texts: Sequence[str], num_threads: int | None = None, as_numpy: bool = False
    ) -> list[list[int]] | IdBatch:
        check_texts(texts)
        if as_numpy:
            return IdBatch(*self.encode_batch_flat(texts, num_threads=num_threads))
        return self._pipe.encode_batch(list(texts), num_threads)

    def encode_batch_flat(self, texts: Sequence[str], num_threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        check_texts(texts)
        return flat_ids(self._pipe.encode_batch(list(texts), num_threads))

    def _encode_with_specials(self, text: str, allowed: dict[str, int]) -> list[int]:
        # leftmost, then longest, special token (tokenizers' added-token matching);
        # the stretches between are encoded on their own, only the first as the text's start
        out: list[int] = []
        for start, end, special in special_stretches(text, allowed):
            if end > start:
                out.extend(self._pipe.encode(text[start:end], start == 0))
            if special is not None:
                out.append(special)
        return out

    def decode(self, ids: Iterable[int]) -> str:
        return self._pipe.decode_ids([self.check_id(i) for i in ids], self._names)

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        return self.decode(ids).encode("utf-8", "surrogatepass")

    def id_to_bytes(self, id: int) -> bytes:
        i = self.check_id(id)
        if i in self._names:
            return self._names[i].encode("utf-8")
        b = self._pipe.id_bytes(i)
        if b is None:
            raise TokenforgeError(f"token id {i} is not used by this vocabulary")
        return b

    def token_bytes(self) -> np.ndarray:
        import numpy as np

        return np.array([len(b) for b in self._spelled_ids()], dtype=np.int32)

    def normalize(self, text: str) -> str:
        """The text as this tokenizer's tokens spell it: the ids' :meth:`id_to_bytes`
        end to end (the normalizer's output, ``▁`` as a space, a WordPiece word
        after a space, SentencePiece's unknown piece as its surface, a special
        token such as BERT's ``[UNK]`` as nothing). :meth:`token_bytes` adds up
        to it, so the metrics and the bits-per-byte harness measure against it
        (``bytes/token`` is always over the caller's text)."""
        if not text:
            return ""
        table = self._spelled_ids()
        return decode_utf8(b"".join([table[i] for i in self.encode_ordinary(text)]))

    def _spelled_ids(self) -> list[bytes]:
        if self._spelling is None:
            self._spelling = [self._bytes_or_empty(i) for i in range(self._vocab_size)]
        return self._spelling

    def normalized(self, text: str) -> str:
        """The normalizer's output alone (before pre-tokenization; SentencePiece: spaces as ``▁``)."""
        return self._pipe.normalize(text)

    def get_bos_token_id(self) -> int:
        """The BOS token: ``<s>`` (SentencePiece, Llama, T5 ...) or BERT's ``[CLS]``."""
        if "[CLS]" in self._specials and "<s>" not in self._specials:
            return self._specials["[CLS]"]
        return super().get_bos_token_id()

    def _bytes_or_empty(self, i: int) -> bytes:
        """What :meth:`token_bytes` counts for an id: nothing for a special token
        (BERT's ``[UNK]`` included) or an unused id."""
        if i in self._names:
            return b""
        return (self._pipe.id_bytes(i) if i < len(self._pipe.model.pieces) else None) or b""

    def encode_with_offsets(
        self, text: str, *, allowed_special: SpecialArg | None = None, disallowed_special: SpecialArg = ()
    ) -> NoReturn:
        raise TokenforgeError(
            "offsets are not available for imported tokenizers: their normalizers (NFKC, SentencePiece's "
            "charsmap, whitespace rules) do not keep an alignment to the caller's text"
        )

    def encode_batch_with_offsets(self, texts: Sequence[str], num_threads: int | None = None) -> NoReturn:
        self.encode_with_offsets("")  # the same refusal

    def inspect_extra(self) -> dict:
        return {"source": self.source, "model": self._pipe.kind}

    def piece(self, id: int) -> str | None:
        """The model's own piece for an id (``▁the``, ``##ing``, ``<0x41>``), or a special token's text."""
        i = self.check_id(id)
        return self._names.get(i) or self._pipe.model.pieces[i]

    def piece_detail(self, id: int) -> dict:
        """What the model knows of an id: its piece, and its score (Unigram, SentencePiece) or merge rank."""
        i = self.check_id(id)
        return {"piece": self.piece(i), **self._pipe.model.detail(i)}

    # ---- training (by the reference libraries) ----------------------------------
    @classmethod
    def train(
        cls,
        corpus: object,
        vocab_size: int,
        *,
        algorithm: str = "spm_unigram",
        num_threads: int | None = None,
        progress: bool = False,
    ) -> PipelineTokenizer:
        """Train one of the field's standard tokenizers with its own library and
        import the result: ``algorithm`` is one of :data:`ALGORITHMS` (``spm_*``:
        sentencepiece, default settings, ``hard_vocab_limit`` off; ``hf_*``:
        tokenizers, BERT's pipeline for WordPiece, Metaspace for Unigram).
        Needs the library installed (the ``dev`` extra has both)."""
        from ..data.corpus import corpus_documents

        docs = corpus_documents(corpus, who="PipelineTokenizer.train")
        return _train(list(docs), vocab_size, algorithm, num_threads)

    @classmethod
    def train_from_iterator(cls, texts: Iterable[str], vocab_size: int, **kwargs: Any) -> PipelineTokenizer:
        """:meth:`train` on an iterable of str (texts, never paths)."""
        from ..data.corpus import Texts

        return cls.train(Texts(texts), vocab_size, **kwargs)

    # ---- files ------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> None:
        from ..formats.pipeline_json import write_pipeline_json

        write_pipeline_json(path, self.source, self._description)

    def to_bytes(self) -> bytes:
        from ..formats.pipeline_json import pipeline_json_text

        return pipeline_json_text(self.source, self._description).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes, state: dict) -> "PipelineTokenizer":
        from ..formats.pipeline_json import pipeline_json_from_bytes

        source, description = pipeline_json_from_bytes(data, "<pickled PipelineTokenizer>")
        return cls(description, source)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "PipelineTokenizer":
        """Read our ``tokenforge-pipeline`` JSON, a tokenizer.json or a SentencePiece ``.model``."""
        from ..formats.kinds import read_any

        return read_any(path, file_formats(), "an imported tokenizer (tokenizer.json, .model or tokenforge-pipeline)")

    def __repr__(self) -> str:
        return f"PipelineTokenizer({self.source}, {self._pipe.kind}, vocab_size={self.vocab_size})"


def file_formats() -> list[Format]:
    """The files :func:`tokenforge.load` reads into a PipelineTokenizer, most
    specific first (the family's record in :mod:`tokenforge.registry` points here)."""
    from ..formats.hf_pipeline import read_hf_pipeline, sniff_hf_pipeline
    from ..formats.kinds import Format
    from ..formats.pipeline_json import read_pipeline_json, sniff_pipeline_json
    from ..formats.sentencepiece_model import read_sentencepiece_model, sniff_sentencepiece_model

    def read_ours(p: Path) -> PipelineTokenizer:
        source, description = read_pipeline_json(p)
        return PipelineTokenizer(description, source, p)

    return [
        Format("tokenforge-pipeline", sniff_pipeline_json, read_ours),
        Format(
            "huggingface-tokenizer.json-pipeline",
            sniff_hf_pipeline,
            lambda p: PipelineTokenizer(read_hf_pipeline(p), "huggingface", p),
        ),
        Format(
            "sentencepiece-model",
            sniff_sentencepiece_model,
            lambda p: PipelineTokenizer(read_sentencepiece_model(p), "sentencepiece", p),
        ),
    ]


def token_detail(tok: PipelineTokenizer) -> Callable[[int, Callable[[int], dict]], dict]:
    """The playground's detail of an id (the family record's ``detail`` hook): the
    model's piece, and its score (Unigram, SentencePiece) and piece type."""

    def detail(i: int, ref: Callable[[int], dict]) -> dict:
        return tok.piece_detail(i)

    return detail
