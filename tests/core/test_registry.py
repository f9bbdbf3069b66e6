"""The family seam (tokenforge.registry): every record agrees with its family's
class, and load(), the CLI and compare's specs all work through it."""

from __future__ import annotations

import inspect
import warnings

import pytest

import tokenforge
from tokenforge import registry
from tokenforge.cli.main import build_parser
from tokenforge.eval.families import SpecError, parse_specs, train_tokenizer


def test_each_record_names_its_class_and_the_class_names_its_family():
    assert list(registry.FAMILIES) == list(registry.BUILT_IN)
    for name, fam in registry.FAMILIES.items():
        assert fam.cls.family == name
        assert getattr(tokenforge, fam.class_name) is fam.cls
        assert issubclass(fam.cls, tokenforge.Tokenizer)
        assert callable(fam.cls.train) and callable(fam.cls.train_from_iterator)


def test_load_order_names_every_family_and_format_names_are_unique():
    assert sorted(registry.LOAD_ORDER) == sorted(registry.FAMILIES)
    names = [f.name for f in registry.formats()]
    assert len(names) == len(set(names))
    assert names[0].startswith("growing")  # the most specific sniffer first


def test_lz78_spec_strategies_are_the_family_s():
    from tokenforge.lz78 import DEFAULT_STRATEGY, STRATEGIES

    assert registry.LZ78_STRATEGIES == STRATEGIES
    assert registry.LZ78_DEFAULT_STRATEGY == DEFAULT_STRATEGY


def test_mixedgram_spec_parses_are_the_family_s():
    from tokenforge.mixedgram import PARSES

    assert registry.MIXEDGRAM_PARSES == PARSES


def test_spec_option_defaults_are_the_trainers_parameters():
    """The defaults live in the records; each names a parameter its trainer takes, with the same default."""
    from tokenforge import BPETokenizer, GrowingBPETokenizer, LZ78Tokenizer, Mixedgram

    def params(*fns):
        out = {}
        for fn in fns:
            out.update(inspect.signature(fn).parameters)
        return out

    takes = {
        "bpe": params(BPETokenizer.train),
        "lz78": params(LZ78Tokenizer.train),
        "mixedgram": params(Mixedgram.train),
        "growing": params(GrowingBPETokenizer.__init__, GrowingBPETokenizer.learn_merges),
    }
    own = {"growing": {"rounds"}, "mixedgram": {"parse"}}  # handled by the spec trainer itself
    for name, fam in registry.FAMILIES.items():
        for opt, default in fam.spec.options.items():
            if opt in own.get(name, ()):
                continue
            assert opt in takes[name], (name, opt)
    assert registry.FAMILIES["growing"].spec.options["min_frequency"] == takes["growing"]["min_frequency"].default
    assert registry.FAMILIES["bpe"].spec.options["min_frequency"] == takes["bpe"]["min_frequency"].default


def test_unknown_spec_option_is_refused_with_the_known_ones():
    with pytest.raises(SpecError) as e:
        parse_specs("bpe:patern=gpt2")
    msg = str(e.value)
    assert "'patern'" in msg and "pattern" in msg and "tie_break" in msg
    with pytest.raises(SpecError, match="mixedgram has no option 'vocab'"):
        parse_specs("mixedgram:vocab=3")
    with pytest.raises(SpecError, match="lz78 takes one strategy"):
        parse_specs("lz78:standard:flat_prune")


@pytest.mark.parametrize(
    "text", ["bpe:pattern=gpt2", "lz78:standard:compact", "mixedgram:parse=optimal", "growing:rounds=2"]
)
def test_every_family_trains_from_a_spec_saves_and_loads_through_the_registry(tmp_path, text, tiny_docs):
    spec = parse_specs(text)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # small corpora: "learned fewer merges than asked" is expected
        tok = train_tokenizer(spec, tiny_docs, 320)
    assert registry.family_of(tok).name == spec.family
    path = tmp_path / "tok"
    tok.save(path)
    back = tokenforge.load(path)
    assert type(back) is type(tok)
    probe = "the lazy fox saves time"
    assert back.encode(probe) == tok.encode(probe)
    # the record's embedding modes are exactly the tree modes the tokenizer's hook answers
    from tokenforge.embedding_meta import TREE_MODES, EmbeddingModeError, get_embedding_metadata

    for mode in TREE_MODES:
        if mode in registry.family_of(tok).embedding_modes:
            assert len(get_embedding_metadata(tok, mode)["parent"]) == tok.model_vocab_size
        else:
            with pytest.raises(EmbeddingModeError):
                get_embedding_metadata(tok, mode)


def test_cli_subcommands_come_from_the_records():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for cmd in ("train", "encode", "decode", "inspect", "demo", "compare", "lz78", "mixedgram", "grow"):
        assert cmd in sub.choices, cmd


def test_hooks_are_declared_on_the_contract():
    base = tokenforge.Tokenizer
    for hook in (
        "embedding_metadata",
        "normalize",
        "inspect_extra",
        "fingerprint_files",
        "jsonl_block_encoder",
        "model_vocab_size",
        "merge_parts",
    ):
        assert hasattr(base, hook), hook
