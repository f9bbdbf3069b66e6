"""Parity-aware BPE (issue 16 item 3): the Rust trainer against the slow
reference of the rule, determinism, the one-language case, typed errors, the
saved record, the CLI and ``compare``'s ``bpe:parity``."""

from __future__ import annotations

import json

import pytest

from repo_paths import FIXTURES
from tokenforge import BPETokenizer, load
from tokenforge.errors import CorpusError, TokenforgeError
from tokenforge.reference.bpe import GPT4_PATTERN, count_words, train_reference
from tokenforge.reference.parity import norms_of, train_parity_reference

# the tiny corpora run out of pairs before the vocabulary is full: expected here
pytestmark = pytest.mark.filterwarnings("ignore:BPE training learned")

TRAIN = {
    "en": ["the cat sat on the mat. the cat ate the rat!", "then the rat ran: 12 cats, 3 mats"] * 3,
    "de": ["die Katze saß auf der Matte; die Katze fraß die Ratte", "größer als 12 Katzen"] * 2,
    "ru": ["кошка сидела на коврике, кошка съела крысу", "крыса бежала"],
}
DEV = {
    "en": ["the cat sat on the mat"],
    "de": ["die Katze saß auf der Matte"],
    "ru": ["кошка сидела на коврике"],
}


def _train(corpus=TRAIN, dev=DEV, vocab=320, **kw):
    kw.setdefault("special_tokens", None)
    kw.setdefault("progress", False)
    return BPETokenizer.train_from_iterator(corpus, vocab, parity=dev, **kw)


def _reference(corpus, dev, num_merges, *, measure="tokens", pattern=GPT4_PATTERN, **kw):
    langs = sorted(dev)
    train_counts = [count_words(corpus[lang], pattern) for lang in langs]
    dev_counts = [count_words(dev[lang], pattern) for lang in langs]
    norms = [measure[lang] for lang in langs] if isinstance(measure, dict) else norms_of(dev_counts, measure)
    return train_parity_reference(train_counts, dev_counts, num_merges, norms=norms, **kw)


@pytest.mark.parametrize("measure", ["tokens", "bytes", "chars", {"en": 10, "de": 13, "ru": 21}])
@pytest.mark.parametrize("tie_break", ["pair_ids", "lexicographic"])
@pytest.mark.parametrize("global_merges", [0, 5])
def test_equal_to_the_slow_reference(measure, tie_break, global_merges):
    tok = _train(
        vocab=256 + 60,
        tie_break=tie_break,
        parity_measure=measure,
        parity_global_merges=global_merges,
    )
    want, chosen = _reference(TRAIN, DEV, 60, measure=measure, tie_break=tie_break, global_merges=global_merges)
    assert tok.merges == want
    rec = tok.data.training["parity"]
    langs = rec["languages"]
    assert langs == ["de", "en", "ru"]
    for i, lang in enumerate(langs):
        assert rec["per_language"][lang]["merges"] == sum(1 for c in chosen if c == i)
    assert sum(1 for c in chosen if c is None) == min(global_merges, len(want))


@pytest.mark.parametrize("window,alpha", [(4, 1.0), (10, 2.0), (3, 0.5)])
def test_moving_window_variant_equal_to_the_slow_reference(window, alpha):
    tok = _train(vocab=256 + 60, parity_window=window, parity_window_alpha=alpha, parity_global_merges=2)
    want, chosen = _reference(TRAIN, DEV, 60, global_merges=2, window=window, alpha=alpha)
    assert tok.merges == want
    rec = tok.data.training["parity"]
    assert rec["window"] == window and rec["window_alpha"] == alpha
    if (window, alpha) == (3, 0.5):  # the window changes which languages are served here
        assert chosen != _reference(TRAIN, DEV, 60, global_merges=2)[1]


@pytest.mark.parametrize("tie_break", ["pair_ids", "lexicographic"])
@pytest.mark.parametrize(
    "tolerance,shared,global_merges",
    [(0.1, 0, 0), (0.3, 0, 2), (1.0, 0, 0), (0, 1, 0), (0, 2, 0), (0, 4.5, 3), (0.2, 2, 0)],
)
def test_tolerance_and_shared_variants_equal_to_the_slow_reference(tolerance, shared, global_merges, tie_break):
    for measure in ("tokens", "bytes"):
        kw = dict(tie_break=tie_break, parity_measure=measure, parity_global_merges=global_merges)
        tok = _train(vocab=256 + 80, parity_tolerance=tolerance, parity_shared=shared, **kw)
        want, chosen = _reference(
            TRAIN,
            DEV,
            80,
            measure=measure,
            tie_break=tie_break,
            global_merges=global_merges,
            tolerance=tolerance,
            shared=shared,
        )
        assert tok.merges == want
        rec = tok.data.training["parity"]
        assert rec.get("tolerance", 0) == tolerance and rec.get("shared", 0) == shared
        for i, lang in enumerate(rec["languages"]):
            assert rec["per_language"][lang]["merges"] == sum(1 for c in chosen if c == i)


#: TRAIN with each text repeated a different number of times (up to 700): pair counts in
#: the hundreds and thousands, where the shared-pair pick's buckets are 1/32 of a count wide
BIG = {
    lang: [t for i, t in enumerate(texts) for _ in range(1 + (i * 97 + len(t) * 31) % 700)]
    for lang, texts in TRAIN.items()
}


@pytest.mark.parametrize("shared,min_frequency", [(1.2, 1), (2, 1), (3.5, 40)])
@pytest.mark.parametrize("tie_break", ["pair_ids", "lexicographic"])
def test_shared_variant_on_large_counts_equal_to_the_slow_reference(shared, min_frequency, tie_break):
    kw = dict(tie_break=tie_break, min_frequency=min_frequency)
    tok = _train(BIG, vocab=256 + 60, parity_shared=shared, parity_measure="bytes", **kw)
    want, _ = _reference(BIG, DEV, 60, measure="bytes", shared=shared, **kw)
    assert tok.merges == want
    assert tok.merges != _train(BIG, vocab=256 + 60, parity_measure="bytes", **kw).merges


@pytest.mark.parametrize("tie_break", ["pair_ids", "lexicographic"])
@pytest.mark.parametrize(
    "rule,kw",
    [
        ("levelup", dict(tolerance=0.0)),
        ("levelup", dict(tolerance=0.1, global_merges=3)),
        ("levelup", dict(tolerance=0.05, shared=2)),
        ("levelup", dict(tolerance=0.0, window=4, alpha=1.0)),
        ("excess", dict(gain=0.5)),
        ("excess", dict(gain=4.0, global_merges=2)),
        ("excess", dict(gain=50.0)),
        ("group", dict(shared=2, gain=0.0)),
        ("group", dict(shared=3, gain=2.0, tolerance=0.05)),
        ("group", dict(shared=1.5, gain=10.0, global_merges=2)),
        ("keep", dict(tolerance=0.0)),
        ("keep", dict(tolerance=0.05, global_merges=10)),
        ("keep", dict(tolerance=0.0, shared=2, global_merges=5)),
        ("keep", dict(tolerance=0.02, window=4, alpha=1.0, global_merges=5)),
    ],
)
@pytest.mark.parametrize("reference", ["en", "de", "median"])
def test_levelup_and_excess_rules_equal_to_the_slow_reference(rule, kw, reference, tie_break):
    names = {"tolerance": "parity_tolerance", "shared": "parity_shared", "global_merges": "parity_global_merges"}
    names.update(window="parity_window", alpha="parity_window_alpha", gain="parity_gain")
    for measure in ("tokens", "bytes"):
        tok = _train(
            vocab=256 + 80,
            tie_break=tie_break,
            parity_measure=measure,
            parity_rule=rule,
            parity_reference=reference,
            **{names[k]: v for k, v in kw.items()},
        )
        ref = reference if reference == "median" else sorted(DEV).index(reference)
        want, chosen = _reference(TRAIN, DEV, 80, measure=measure, tie_break=tie_break, rule=rule, reference=ref, **kw)
        assert tok.merges == want
        rec = tok.data.training["parity"]
        assert rec["rule"] == rule and rec["reference"] == reference
        assert rec.get("gain") == kw.get("gain") and rec.get("tolerance", 0) == kw.get("tolerance", 0)
        for i, lang in enumerate(rec["languages"]):
            assert rec["per_language"][lang]["merges"] == sum(1 for c in chosen if c == i)


@pytest.mark.parametrize("tie_break", ["pair_ids", "lexicographic"])
@pytest.mark.parametrize(
    "rule,corpus,kw",
    [
        ("discount", "TRAIN", dict(shared=2, gain=1.0)),
        ("discount", "TRAIN", dict(shared=3, gain=0.3, tolerance=0.05, global_merges=2)),
        ("discount", "BIG", dict(shared=1.5, gain=1.0)),
        ("discount", "BIG", dict(shared=2, gain=0.5, min_frequency=40)),
        ("discount", "BIG", dict(shared=3.5, gain=0.25, global_merges=5)),
        ("lift", "TRAIN", dict(shared=2, gain=1.0)),
        ("lift", "TRAIN", dict(shared=3, gain=0.3, tolerance=0.05, global_merges=2)),
        ("lift", "BIG", dict(shared=1.5, gain=4.0)),
        ("lift", "BIG", dict(shared=4, gain=0.7, min_frequency=40)),
        ("lift", "BIG", dict(shared=8, gain=37.5, global_merges=5)),
        ("devlift", "TRAIN", dict(shared=2, gain=0.0)),
        ("devlift", "TRAIN", dict(shared=3, gain=1.0, tolerance=0.05, global_merges=2)),
        ("devlift", "BIG", dict(shared=1.5, gain=1.0)),
        ("devlift", "BIG", dict(shared=4, gain=0.7, min_frequency=40)),
    ],
)
@pytest.mark.parametrize("other", [False, True])
def test_band_score_rules_equal_to_the_slow_reference(rule, corpus, kw, other, tie_break):
    # the second reference: another fixed language for discount (it needs one), the median for the lifts
    reference = ("de" if rule == "discount" else "median") if other else "en"
    names = {"tolerance": "parity_tolerance", "shared": "parity_shared", "global_merges": "parity_global_merges"}
    names.update(gain="parity_gain", min_frequency="min_frequency")
    text = {"TRAIN": TRAIN, "BIG": BIG}[corpus]
    tok = _train(
        text,
        vocab=256 + 60,
        tie_break=tie_break,
        parity_measure="bytes",
        parity_rule=rule,
        parity_reference=reference,
        **{names[k]: v for k, v in kw.items()},
    )
    ref = "median" if reference == "median" else sorted(DEV).index(reference)
    want, chosen = _reference(text, DEV, 60, measure="bytes", tie_break=tie_break, rule=rule, reference=ref, **kw)
    assert tok.merges == want
    rec = tok.data.training["parity"]
    assert (rec["rule"], rec["reference"], rec["gain"], rec["shared"]) == (rule, reference, kw["gain"], kw["shared"])
    for i, lang in enumerate(rec["languages"]):
        assert rec["per_language"][lang]["merges"] == sum(1 for c in chosen if c == i)


def test_discount_gain_0_is_the_shared_pick_and_gain_1_ignores_the_reference():
    kw = dict(vocab=256 + 60, parity_measure="bytes", parity_shared=2.0, parity_reference="en")
    shared = _train(BIG, parity_rule="levelup", **kw).merges
    assert _train(BIG, parity_rule="discount", parity_gain=0.0, **kw).merges == shared
    full = _train(BIG, parity_rule="discount", parity_gain=1.0, **kw).merges
    assert full != shared
    # gain 1: the band's score is the count over every language but English (the slow reference)
    en = sorted(DEV).index("en")
    want, _ = _reference(BIG, DEV, 60, measure="bytes", rule="discount", reference=en, shared=2.0, gain=1.0)
    assert full == want


@pytest.mark.parametrize(
    "rule,kw",
    [
        ("levelup", {}),
        ("group", {"shared": 2.0, "gain": 1.0}),
        ("excess", {"gain": 8.0}),
        ("keep", {"global_merges": 8}),
    ],
)
def test_median_reference_moves_and_equals_the_slow_reference(rule, kw):
    # four languages whose median changes as they are served: no fixed reference gives the same merges
    train = {**TRAIN, "fr": ["le chat est sur le tapis, le chat a mangé le rat", "plus de 12 chats et 3 tapis"] * 2}
    dev = {**DEV, "fr": ["le chat est assis sur le tapis"]}
    names = {"shared": "parity_shared", "gain": "parity_gain", "global_merges": "parity_global_merges"}
    tok = _train(
        train, dev, vocab=256 + 100, parity_rule=rule, parity_reference="median", **{names[k]: v for k, v in kw.items()}
    )
    want, _ = _reference(train, dev, 100, rule=rule, reference="median", **kw)
    assert tok.merges == want
    assert tok.data.training["parity"]["reference"] == "median"
    if rule != "excess":
        assert all(want != _reference(train, dev, 100, rule=rule, reference=i, **kw)[0] for i in range(4))


def test_levelup_and_excess_serve_only_the_languages_dearer_than_the_reference():
    # ru is the dearest and en the cheapest here (dev tokens before training: en 22, de 28, ru 42)
    for rule, kw in (("levelup", {}), ("excess", {"gain": 100.0})):
        _, chosen = _reference(TRAIN, DEV, 80, rule=rule, reference=2, **kw)  # ru as the reference
        assert set(chosen) == {None}  # nobody is dearer than ru: every merge is global
        _, chosen = _reference(TRAIN, DEV, 80, rule=rule, reference=0, **kw)  # de as the reference
        assert 2 in chosen and 1 not in chosen  # ru is served, en (cheaper than de) never alone
    # gain 0 is plain BPE on all the text
    plain = train_reference(count_words([t for v in TRAIN.values() for t in v], GPT4_PATTERN), 80)
    assert _reference(TRAIN, DEV, 80, rule="excess", reference=1, gain=0.0)[0] == plain
    assert _train(vocab=256 + 80, parity_rule="excess", parity_reference="en", parity_gain=0.0).merges == plain


def test_lift_gain_0_is_the_shared_pick():
    kw = dict(vocab=256 + 60, parity_measure="bytes", parity_reference="en")
    shared = _train(BIG, parity_rule="levelup", parity_shared=2.0, **kw).merges
    assert _train(BIG, parity_rule="lift", parity_gain=0.0, parity_shared=2.0, **kw).merges == shared
    lifted = _train(BIG, parity_rule="lift", parity_gain=1.0, parity_shared=2.0, **kw).merges
    assert lifted != shared


@pytest.mark.parametrize(
    "kw",
    [
        dict(parity_rule="levelup"),
        dict(parity_rule="excess", parity_gain=3.0),
        dict(parity_rule="group", parity_gain=3.0, parity_shared=2.0),
        dict(parity_rule="keep", parity_global_merges=0.2, parity_shared=2.0),
        dict(parity_rule="discount", parity_gain=0.5, parity_shared=2.0),
        dict(parity_rule="lift", parity_gain=2.0, parity_shared=1.5),
        dict(parity_rule="devlift", parity_gain=1.0, parity_shared=1.5),
    ],
)
def test_new_rules_deterministic_whatever_the_threads_and_recorded(tmp_path, kw):
    files = set()
    for threads in (1, 2, 1, 2):
        p = tmp_path / f"t{threads}.json"
        _train(vocab=400, num_threads=threads, parity_reference="de", **kw).save(p)
        files.add(p.read_bytes())
    assert len(files) == 1
    rec = load(p).data.training["parity"]
    assert rec["rule"] == kw["parity_rule"] and rec["reference"] == "de"
    assert rec.get("gain") == kw.get("parity_gain")


def test_new_rules_typed_errors():
    with pytest.raises(TokenforgeError, match="unknown parity_rule 'fair'"):
        _train(parity_rule="fair")
    for rule in ("levelup", "excess", "keep"):
        with pytest.raises(TokenforgeError, match="needs parity_reference"):
            _train(parity_rule=rule)
        with pytest.raises(TokenforgeError, match="needs parity_reference"):
            _train(parity_rule=rule, parity_reference="fr")
    with pytest.raises(TokenforgeError, match="needs parity_shared"):
        _train(parity_rule="group", parity_reference="en")
    with pytest.raises(TokenforgeError, match="takes no parity_tolerance"):
        _train(parity_rule="excess", parity_reference="en", parity_tolerance=0.1)
    for bad in (-1.0, float("nan"), "2", True):
        with pytest.raises(TokenforgeError, match="parity_gain must be"):
            _train(parity_rule="excess", parity_reference="en", parity_gain=bad)
    with pytest.raises(TokenforgeError, match="'discount' needs parity_shared"):
        _train(parity_rule="discount", parity_reference="en", parity_gain=0.5)
    with pytest.raises(TokenforgeError, match="fixed parity_reference language, not 'median'"):
        _train(parity_rule="discount", parity_reference="median", parity_shared=2.0)
    for bad in (1.5, -0.1):
        with pytest.raises(TokenforgeError, match="parity_gain must be"):
            _train(parity_rule="discount", parity_reference="en", parity_shared=2.0, parity_gain=bad)
    for rule in ("lift", "devlift"):
        with pytest.raises(TokenforgeError, match=f"'{rule}' needs parity_shared"):
            _train(parity_rule=rule, parity_reference="en", parity_gain=0.5)
        for bad in (-0.5, 2.0**21, float("inf"), float("nan")):
            with pytest.raises(TokenforgeError, match="parity_gain must be"):
                _train(parity_rule=rule, parity_reference="en", parity_shared=2.0, parity_gain=bad)


def test_keep_serves_a_cheaper_language_once_it_rises_above_its_start():
    # de as the reference: en is cheaper (dev tokens before training: en 22, de 28, ru 42)
    levelup = _reference(TRAIN, DEV, 80, rule="levelup", reference=0, global_merges=8)[1]
    keep, floors_at = _reference(TRAIN, DEV, 80, rule="keep", reference=0, global_merges=8)[1], 8
    assert 1 not in levelup  # never the dearest: never served
    assert 1 in keep[floors_at:] and 2 in keep[floors_at:]  # en served too once it rose, ru as before
    tok = _train(vocab=256 + 80, parity_rule="keep", parity_reference="de", parity_global_merges=8)
    assert tok.data.training["parity"]["per_language"]["en"]["merges"] == keep.count(1) > 0
    # with the reference the cheapest language, keep is levelup
    for kw in ({}, {"tolerance": 0.1}, {"shared": 2.0}):
        assert _reference(TRAIN, DEV, 80, rule="keep", reference=1, **kw) == _reference(
            TRAIN, DEV, 80, rule="levelup", reference=1, **kw
        )


def test_the_variants_change_the_merges():
    base = _reference(TRAIN, DEV, 80)
    # a wide tolerance makes (nearly) every merge global; a shared factor picks other pairs
    assert sum(c is None for c in _reference(TRAIN, DEV, 80, tolerance=1.0)[1]) > 0
    assert _reference(TRAIN, DEV, 80, shared=4)[0] != base[0]
    assert _train(vocab=256 + 80, parity_shared=4).merges != _train(vocab=256 + 80).merges


@pytest.mark.parametrize("kw", [dict(parity_tolerance=0.2), dict(parity_shared=2.0)])
def test_variants_deterministic_whatever_the_threads(tmp_path, kw):
    files = set()
    for threads in (1, 2, 1, 2):
        p = tmp_path / f"t{threads}.json"
        _train(vocab=400, num_threads=threads, **kw).save(p)
        files.add(p.read_bytes())
    assert len(files) == 1


def test_min_frequency_exhausts_a_language_and_training_goes_on():
    tok = _train(vocab=256 + 200, min_frequency=3)
    want, chosen = _reference(TRAIN, DEV, 200, min_frequency=3)
    assert tok.merges == want
    assert len(want) < 200 and tok.data.training["num_merges"] == len(want)
    # ru's text is too small for pairs of 3: it was exhausted, the others went on
    assert tok.data.training["parity"]["per_language"]["ru"]["merges"] < len(want) / 3


def test_one_language_is_plain_bpe():
    text = TRAIN["en"] + TRAIN["de"]
    for tie_break in ("pair_ids", "lexicographic"):
        plain = BPETokenizer.train_from_iterator(text, 330, special_tokens=None, tie_break=tie_break, progress=False)
        par = _train({"en": text}, {"en": ["anything at all"]}, vocab=330, tie_break=tie_break)
        assert par.merges == plain.merges
        assert par.merges == train_reference(count_words(text, GPT4_PATTERN), 330 - 256, tie_break=tie_break)


def test_deterministic_whatever_the_threads(tmp_path):
    files = []
    for threads in (1, 2, 1, 2):
        tok = _train(vocab=400, num_threads=threads)
        p = tmp_path / f"t{len(files)}.json"
        tok.save(p)
        files.append(p.read_bytes())
    assert len(set(files)) == 1


def test_serves_the_worst_language_first():
    # plain BPE merges the English pair first; parity serves the language whose dev text costs most
    corpus = {"en": ["aaaa aaaa aaaa aaaa aaaa aaaa aaaa"], "xx": ["xyxy zwzw xyxy"]}
    tok = _train(corpus, {"en": ["aaaa"], "xx": ["xyxyzwzw"]}, vocab=258, pattern=None)
    assert tok.merges[0] == (ord("x"), ord("y"), 256)
    plain = BPETokenizer.train_from_iterator(sum(corpus.values(), []), 258, special_tokens=None, pattern=None)
    assert plain.merges[0] == (ord("a"), ord("a"), 256)


def test_the_saved_file_records_the_settings(tmp_path):
    tok = _train(vocab=300, parity_measure="chars", parity_global_merges=4)
    tok.save(tmp_path / "t.json")
    back = load(tmp_path / "t.json")
    assert back.merges == tok.merges
    rec = back.data.training["parity"]
    assert rec["measure"] == "chars" and rec["global_merges"] == 4 and rec["rule"] == "foroutan2025"
    de = rec["per_language"]["de"]
    assert de["dev_bytes"] == len(DEV["de"][0].encode()) == de["dev_tokens_before"]
    assert 0 < de["dev_tokens_after"] < de["dev_tokens_before"]
    assert de["train_bytes"] == sum(len(t.encode()) for t in TRAIN["de"])
    plain = BPETokenizer.train_from_iterator(["abc abc"], 260, special_tokens=None, progress=False)
    assert "parity" not in plain.data.training


def test_dev_text_that_is_training_text_counted_once_gives_the_same_training():
    """Dev documents that are also training documents (``compare``'s near-parallel
    dev text) are counted once and their counts shared; the merges and the
    recorded sizes are those of counting each text apart (iterators, which are
    counted as given) and of the slow reference."""
    from tokenforge.bpe_parity import _shared_texts
    from tokenforge.data.corpus import Texts

    dev = {
        "en": [TRAIN["en"][0], "a dev text only", TRAIN["en"][0]],  # twice a document trained on 3 times
        "de": [TRAIN["de"][1]],
        "ru": list(TRAIN["ru"]),  # all of it
    }
    assert _shared_texts(Texts(TRAIN["en"]), Texts(dev["en"])) == (
        [TRAIN["en"][1], TRAIN["en"][1], TRAIN["en"][0], TRAIN["en"][1]],
        TRAIN["en"][0:1] * 2,
        ["a dev text only"],
    )
    assert _shared_texts(Texts(iter(TRAIN["en"])), Texts(dev["en"])) is None
    for measure in ("tokens", "bytes"):
        a = _train(dev=dev, vocab=256 + 60, parity_measure=measure)
        b = _train(
            corpus={k: iter(v) for k, v in TRAIN.items()},
            dev={k: iter(v) for k, v in dev.items()},
            vocab=256 + 60,
            parity_measure=measure,
        )
        want, _ = _reference(TRAIN, dev, 60, measure=measure)
        assert a.merges == b.merges == want
        assert a.data.training["parity"] == b.data.training["parity"]


def test_files_jsonl_with_lang_and_per_language_paths_agree(tmp_path):
    rows = [{"text": t, "lang": lang} for lang, texts in TRAIN.items() for t in texts]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    dev = {}
    per_lang = {}
    for lang in TRAIN:
        (tmp_path / f"dev.{lang}.txt").write_text(DEV[lang][0])
        (tmp_path / f"train.{lang}.jsonl").write_text(
            "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in TRAIN[lang])
        )
        dev[lang] = str(tmp_path / f"dev.{lang}.txt")
        per_lang[lang] = [tmp_path / f"train.{lang}.jsonl"]
    kw = dict(special_tokens=None, progress=False, parity=dev)
    a = BPETokenizer.train(str(tmp_path / "train.jsonl"), 320, **kw)
    b = BPETokenizer.train(per_lang, 320, **kw)
    assert a.merges == b.merges == _train(vocab=320).merges


def test_typed_errors(tmp_path):
    with pytest.raises(TypeError, match="parity must map"):
        _train(dev=["dev text"])
    with pytest.raises(TokenforgeError, match="no language given"):
        BPETokenizer.train(str(FIXTURES / "multilingual" / "heldout.jsonl"), 300, parity={})
    with pytest.raises(TokenforgeError, match="not a language code"):
        _train(dev={"english!": ["x"]})
    with pytest.raises(CorpusError, match="dev language 'fr' has no training text"):
        _train(dev={**DEV, "fr": ["le chat"]})
    with pytest.raises(CorpusError, match="training language 'ru' has no dev text"):
        _train(dev={"en": DEV["en"], "de": DEV["de"]})
    with pytest.raises(CorpusError, match="dev text of 'de' is empty"):
        _train(dev={**DEV, "de": [""]})
    with pytest.raises(TokenforgeError, match="unknown parity_measure"):
        _train(parity_measure="words")
    with pytest.raises(TokenforgeError, match="gives no size for the dev text of 'ru'"):
        _train(parity_measure={"en": 1, "de": 1})
    with pytest.raises(TokenforgeError, match="must be a positive int"):
        _train(parity_measure={"en": 1, "de": 0, "ru": 1})
    with pytest.raises(TokenforgeError, match="parity_global_merges must be"):
        _train(parity_global_merges=-1)
    with pytest.raises(TokenforgeError, match="must be in"):
        _train(parity_global_merges=1.5)
    with pytest.raises(TokenforgeError, match="parity_window must be"):
        _train(parity_window=-1)
    with pytest.raises(TokenforgeError, match="parity_window_alpha must be"):
        _train(parity_window=5, parity_window_alpha=0)
    for bad in (-0.1, float("nan"), float("inf"), "0.1", True):
        with pytest.raises(TokenforgeError, match="parity_tolerance must be"):
            _train(parity_tolerance=bad)
    for bad in (0.5, -1, float("inf"), "2", True):
        with pytest.raises(TokenforgeError, match="parity_shared must be"):
            _train(parity_shared=bad)
    with pytest.raises(CorpusError, match="no training text with two bytes"):
        _train({**TRAIN, "ru": ["x"]})
    # a JSON-lines corpus needs a lang on every line; a plain text file gives none
    (tmp_path / "mixed.jsonl").write_text('{"text": "abc abc", "lang": "en"}\n{"text": "def def"}\n')
    with pytest.raises(CorpusError, match="document 2 has no 'lang' field"):
        BPETokenizer.train(str(tmp_path / "mixed.jsonl"), 300, parity={"en": str(tmp_path / "mixed.jsonl")})
    (tmp_path / "plain.txt").write_text("abc abc")
    with pytest.raises(CorpusError, match="gives its documents no language"):
        BPETokenizer.train(str(tmp_path / "plain.txt"), 300, parity={"en": str(tmp_path / "plain.txt")})
    with pytest.raises(CorpusError, match="mapping language -> texts"):
        BPETokenizer.train_from_iterator(["abc abc"], 300, parity={"en": ["abc"]})
    with pytest.raises(TokenforgeError, match="seed 003"):
        BPETokenizer().train(input_path=str(tmp_path / "plain.txt"), vocab_size=300, parity={"en": "x"})


def test_cli_end_to_end(tmp_path, capsys):
    from tokenforge.cli.main import main

    args = []
    for lang in TRAIN:
        (tmp_path / f"{lang}.txt").write_text("\n\n".join(TRAIN[lang]))
        (tmp_path / f"dev.{lang}.txt").write_text(DEV[lang][0])
        args.append(f"{lang}={tmp_path / f'{lang}.txt'}")
    dev = [x for lang in TRAIN for x in ("--parity", f"{lang}={tmp_path / f'dev.{lang}.txt'}")]
    out = tmp_path / "tok"
    common = ["--vocab-size", "320", "--specials", "none", "--split-on", "\n\n", "-q"]
    assert main(["train", *args, *common, "-o", str(out), *dev, "--parity-global-merges", "3"]) == 0
    tok = load(out)
    assert tok.merges == _train(vocab=320, parity_global_merges=3).merges
    assert tok.data.training["parity"]["global_merges"] == 3
    assert main(["train", *args, *common, "-o", str(tmp_path / "t1"), *dev, "--parity-global-merges", "0.5"]) == 0
    rec = load(tmp_path / "t1").data.training["parity"]
    assert rec["global_share"] == 0.5 and rec["global_merges"] == (320 - 256) // 2
    assert main(["train", *args, *common, "-o", str(tmp_path / "t6"), *dev, "--parity-window", "8"]) == 0
    rec = load(tmp_path / "t6").data.training["parity"]
    assert rec["window"] == 8 and rec["window_alpha"] == 2.0
    assert load(tmp_path / "t6").merges == _train(vocab=320, parity_window=8).merges
    more = ["--parity-tolerance", "0.2", "--parity-shared", "2"]
    assert main(["train", *args, *common, "-o", str(tmp_path / "t7"), *dev, *more]) == 0
    rec = load(tmp_path / "t7").data.training["parity"]
    assert rec["tolerance"] == 0.2 and rec["shared"] == 2.0
    assert load(tmp_path / "t7").merges == _train(vocab=320, parity_tolerance=0.2, parity_shared=2).merges
    # sizes given per language
    assert main(["train", *args, *common, "-o", str(tmp_path / "t2"), *dev, "--parity-measure", "en=2,de=3,ru=5"]) == 0
    assert load(tmp_path / "t2").data.training["parity"]["measure"] == {"de": 3, "en": 2, "ru": 5}
    capsys.readouterr()
    # a training language without dev text: exit 1, one line naming it
    assert main(["train", *args, *common, "-o", str(tmp_path / "t3"), *dev[:4]]) == 1
    assert "training language 'ru' has no dev text" in capsys.readouterr().err
    # mixing LANG=PATH and bare paths is refused; a missing dev file is exit 3
    assert main(["train", args[0], str(tmp_path / "de.txt"), *common, "-o", str(tmp_path / "t4"), *dev]) == 1
    assert main(["train", *args, *common, "-o", str(tmp_path / "t5"), "--parity", f"en={tmp_path / 'no'}"]) == 3


def test_compare_with_bpe_parity(tmp_path, monkeypatch):
    from tokenforge.cli.main import main
    from tokenforge.eval.families import SpecError, parse_specs, train_tokenizer

    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "mpl"))
    data = FIXTURES / "multilingual" / "heldout.jsonl"
    out = tmp_path / "r"
    fams = "bpe,bpe:parity,bpe:parity:parity_global_merges=20,bpe:parity:parity_shared=1.5:parity_tolerance=0.1"
    fams += ",bpe:parity:parity_rule=excess:parity_gain=4"
    args = ["compare", str(data), "--heldout", str(data), "--vocab-sizes", "400", "--families", fams]
    assert main([*args, "--reference-lang", "en", "-o", str(out), "-q"]) == 0
    res = json.loads((out / "results.json").read_text())
    rows = {r["spec"]: r for r in res["rows"]}
    variant = "bpe:parity:parity_shared=1.5:parity_tolerance=0.1"
    excess = "bpe:parity:parity_rule=excess:parity_gain=4"
    assert set(rows) == {"bpe", "bpe:parity", "bpe:parity:parity_global_merges=20", variant, excess}
    for r in rows.values():
        assert "error" not in r and r["languages"]["gini"] is not None
    tok = load(rows["bpe:parity"]["serve_path"])
    rec = tok.data.training["parity"]
    assert rec["languages"] == sorted({"en", "de", "es", "fr", "it", "ja", "nl", "pl", "ru", "uk"})
    assert isinstance(rec["measure"], dict) and rec["measure"]["en"] == sum(
        len(json.loads(line)["text"].encode()) for line in data.read_text().splitlines() if '"lang": "en"' in line
    )
    assert load(rows["bpe:parity:parity_global_merges=20"]["serve_path"]).data.training["parity"]["global_merges"] == 20
    rec = load(rows[variant]["serve_path"]).data.training["parity"]
    assert rec["shared"] == 1.5 and rec["tolerance"] == 0.1
    rec = load(rows[excess]["serve_path"]).data.training["parity"]
    assert (rec["rule"], rec["reference"], rec["gain"]) == ("excess", "en", 4.0)
    # options of bpe:parity alone, and bare words other than parity, are refused
    with pytest.raises(TokenforgeError, match="only apply to bpe:parity"):
        train_tokenizer(parse_specs("bpe:parity_global_merges=3")[0], ["abc"], 300)
    with pytest.raises(TokenforgeError, match="only apply to bpe:parity"):
        train_tokenizer(parse_specs("bpe:parity_shared=2")[0], ["abc"], 300)
    with pytest.raises(SpecError, match="takes the word 'parity'"):
        parse_specs("bpe:fast")
    # a corpus without languages: bpe:parity fails with the reason, the others go on
    plain = tmp_path / "plain.jsonl"
    plain.write_text("".join(json.dumps({"text": f"abc abd abe {i} " * 5}) + "\n" for i in range(20)))
    out2 = tmp_path / "r2"
    assert (
        main(["compare", str(plain), "--vocab-sizes", "300", "--families", "bpe,bpe:parity", "-o", str(out2), "-q"])
        == 0
    )
    rows2 = {r["spec"]: r for r in json.loads((out2 / "results.json").read_text())["rows"]}
    assert "error" not in rows2["bpe"] and "carry a language" in rows2["bpe:parity"]["error"]


def test_compare_dev_text_keeps_the_units_that_look_parallel():
    from tokenforge.bpe_parity import compare_parity_inputs
    from tokenforge.data.languages import LangDoc, TrainLanguages

    docs = [LangDoc("x" * 100, "en", f"u{i}") for i in range(5)]
    docs += [LangDoc("y" * 120, "de", f"u{i}") for i in range(4)]
    docs += [LangDoc("z" * 900, "de", "u4"), LangDoc("fortune cookie", "de")]  # not parallel; no unit
    corpus, dev, sizes = compare_parity_inputs(TrainLanguages(tuple(docs), "en"), "parallel")
    assert sorted(corpus) == ["de", "en"] and len(list(corpus["de"].texts)) == 6
    assert list(dev["de"].texts) == ["y" * 120] * 4 and sizes == {"de": 400, "en": 500}
    corpus, dev, measure = compare_parity_inputs(TrainLanguages(tuple(docs), "en"), "chars")
    assert measure == "chars" and len(list(dev["de"].texts)) == 6
    with pytest.raises(CorpusError, match="reference language 'fr'"):
        compare_parity_inputs(TrainLanguages(tuple(docs), "fr"), "parallel")
    with pytest.raises(CorpusError, match="no training document of 'ru' is parallel"):
        compare_parity_inputs(TrainLanguages((*docs, LangDoc("привет", "ru")), "en"), "parallel")


def test_compare_parity_dev_text_of_its_own():
    from tokenforge.bpe_parity import compare_parity_inputs
    from tokenforge.data.languages import LangDoc, TrainLanguages

    train = (LangDoc("a" * 50, "en", "u0"), LangDoc("b" * 70, "de", "u0"), LangDoc("c" * 10, "de"))
    dev = (LangDoc("hello world", "en", "m1"), LangDoc("hallo welt", "de", "m1"))
    dev += (LangDoc("good", "en", "m2"), LangDoc("gut", "de", "m2"))
    corpus, got, measure = compare_parity_inputs(TrainLanguages(train, "en", dev), "parallel")
    # the training documents stay the corpus (all of them); the dev documents are the dev
    # text, compared by their tokens (exactly parallel), not sized by the reference's bytes
    assert measure == "tokens" and len(list(corpus["de"].texts)) == 2
    assert {k: list(v.texts) for k, v in got.items()} == {"de": ["hallo welt", "gut"], "en": ["hello world", "good"]}
    _, _, measure = compare_parity_inputs(TrainLanguages(train, "en", dev), "chars")
    assert measure == "chars"
    # a unit one language lacks: refused, naming the language, the count and a unit
    with pytest.raises(CorpusError, match=r"text of 'de' lacks 1 of the 3 parallel units \(e.g. 'm3'\)"):
        compare_parity_inputs(TrainLanguages(train, "en", (*dev, LangDoc("x", "en", "m3"))), "parallel")
    with pytest.raises(CorpusError, match="of 'de' has no 'parallel_id'"):
        compare_parity_inputs(TrainLanguages(train, "en", (*dev, LangDoc("x", "de"))), "parallel")
    # per-language files without units are taken as given (FLORES-style: line i is sentence i)
    plain = (LangDoc("hello world", "en"), LangDoc("hallo welt", "de"))
    _, got, measure = compare_parity_inputs(TrainLanguages(train, "en", plain), "parallel")
    assert measure == "tokens" and sorted(got) == ["de", "en"]


def test_compare_parity_dev_cli(tmp_path, monkeypatch):
    from tokenforge.cli.main import main

    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "mpl"))
    data = FIXTURES / "multilingual" / "heldout.jsonl"
    lines = data.read_text().splitlines()
    # the dev text: the fixture's first page in every language (as parallel units), in a file of its own
    first = json.loads(lines[0])["parallel_id"]
    dev = tmp_path / "dev.jsonl"
    dev.write_text("".join(x + "\n" for x in lines if json.loads(x)["parallel_id"] == first))
    out = tmp_path / "r"
    args = ["compare", str(data), "--heldout", str(data), "--vocab-sizes", "400", "--families", "bpe,bpe:parity"]
    assert main([*args, "--parity-dev", str(dev), "-o", str(out), "-q"]) == 0
    res = json.loads((out / "results.json").read_text())
    rows = {r["spec"]: r for r in res["rows"]}
    assert all("error" not in r for r in rows.values())
    rec = load(rows["bpe:parity"]["serve_path"]).data.training["parity"]
    assert rec["measure"] == "tokens"
    en_dev = sum(len(json.loads(x)["text"].encode()) for x in dev.read_text().splitlines() if '"lang": "en"' in x)
    assert rec["per_language"]["en"]["dev_bytes"] == en_dev
    assert f"--parity-dev {dev}" in res["command"]
    assert res["corpus"]["parity_dev_languages"]["en"]["bytes"] == en_dev
    assert "Parity dev text (`bpe:parity`)" in (out / "report.md").read_text()
    # the dev text is part of bpe:parity's cache key (plain bpe's cache is reused)
    dev.write_text("".join(x + "\n" for x in lines if json.loads(x)["parallel_id"] != first))
    assert main([*args, "--parity-dev", str(dev), "-o", str(out), "-q"]) == 0
    rows = {r["spec"]: r for r in json.loads((out / "results.json").read_text())["rows"]}
    assert rows["bpe"]["reused"] and not rows["bpe:parity"]["reused"]
    # a dev file whose documents have no language: exit 1, one line saying so
    nolang = tmp_path / "nolang.txt"
    nolang.write_text("some text\n")
    assert main([*args, "--parity-dev", str(nolang), "-o", str(tmp_path / "r3"), "-q"]) == 1


def test_the_frontier_script_on_the_committed_fixture(tmp_path):
    import os
    import subprocess
    import sys

    from repo_paths import ROOT
    from tokenforge.bpe_parity import compare_parity_inputs
    from tokenforge.data.languages import TrainLanguages, read_language_documents
    from tokenforge.eval.languages import per_language_metrics

    data = FIXTURES / "multilingual" / "heldout.jsonl"
    out = tmp_path / "frontier"
    only = "foroutan2025,levelup 0.1,excess 16,foroutan2025 shared 2,levelup median 0"
    cmd = [sys.executable, str(ROOT / "bench" / "parity_frontier.py"), "--data", str(tmp_path), "--train", str(data)]
    cmd += ["--heldout", str(data), "--vocab", "300", "--only", only, "-o", str(out)]
    env = {**os.environ, "MPLCONFIGDIR": str(tmp_path / "mpl")}
    subprocess.run(cmd, check=True, env=env, capture_output=True, timeout=300)
    res = json.loads((out / "frontier.json").read_text())
    (s,) = res["sizes"]["300"].values()  # only the near-parallel set: no catalog files here
    assert sorted(r["label"] for r in s["rows"]) == sorted(only.split(","))
    assert "foroutan2025" in (out / "frontier.md").read_text()
    assert (out / "frontier.png").read_bytes()[:4] == b"\x89PNG"
    # the figures are the tokenizers' own: retrain one and measure it here
    docs = tuple(read_language_documents(data))
    corpus, dev, norms = compare_parity_inputs(TrainLanguages(docs, "en"), "parallel")
    plain = BPETokenizer.train_from_iterator([d.text for d in docs], 300, progress=False)
    tok = BPETokenizer.train_from_iterator(
        corpus,
        300,
        parity=dev,
        parity_measure=norms,
        parity_reference="en",
        parity_tolerance=0.1,
        parity_rule="levelup",
        progress=False,
    )
    row = next(r for r in s["rows"] if r["label"] == "levelup 0.1")
    # the dev figures, taken from the trainer's record, are those of encoding the dev text
    cost = {lang: len(tok.encode_batch_flat(list(t.texts))[0]) / norms[lang] for lang, t in dev.items()}
    assert row["dev"]["premiums"] == pytest.approx({lang: c / cost["en"] for lang, c in cost.items()})
    for t, got in ((plain, s["plain"]), (tok, row)):
        m = per_language_metrics(t, list(docs), reference="en")
        langs = m["languages"].values()
        assert got["heldout"]["gini"] == pytest.approx(m["gini"])
        assert got["heldout"]["bytes_per_token"] == pytest.approx(
            sum(v["bytes"] for v in langs) / sum(v["tokens"] for v in langs)
        )
    assert row["heldout"]["gini_cut"] == pytest.approx(1 - row["heldout"]["gini"] / s["plain"]["heldout"]["gini"])
    assert row["heldout"]["loss"] == pytest.approx(
        1 - row["heldout"]["bytes_per_token"] / s["plain"]["heldout"]["bytes_per_token"]
    )
    # on its dev text the rule brought the dearest language nearer English than plain BPE did
    assert max(row["dev"]["premiums"].values()) < max(s["plain"]["dev"]["premiums"].values())
    # --add: rows run later join the file (the same label replaced), in CONFIGS order
    add = "levelup 0.1,foroutan2025 shared 1.5 global 0.1"
    cmd[cmd.index("--only") + 1] = add
    subprocess.run([*cmd, "--add"], check=True, env=env, capture_output=True, timeout=300)
    (s2,) = json.loads((out / "frontier.json").read_text())["sizes"]["300"].values()
    order = [c[0] for c in _frontier_configs()]
    labels = [r["label"] for r in s2["rows"]]
    assert labels == sorted(set(only.split(",")) | set(add.split(",")), key=order.index)
    again = next(r for r in s2["rows"] if r["label"] == "levelup 0.1")
    assert {**again, "train_s": 0} == {**row, "train_s": 0}
    assert s2["plain"] == s["plain"] and set(s2["dev_picks"]) >= set(s["dev_picks"])


def _frontier_configs():
    import importlib.util

    from repo_paths import ROOT

    spec = importlib.util.spec_from_file_location("parity_frontier", ROOT / "bench" / "parity_frontier.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.CONFIGS


@pytest.mark.parametrize("tie_break", ["pair_ids", "lexicographic"])
def test_devlift_with_dev_text_inside_the_training_text_equal_to_the_slow_reference(tie_break):
    # compare's near-parallel case: each language's dev text is part of its training text
    dev = {lang: texts[: max(1, len(texts) // 2)] for lang, texts in BIG.items()}
    kw = dict(shared=2.0, gain=1.0, global_merges=4)
    tok = _train(
        BIG,
        dev,
        vocab=256 + 60,
        tie_break=tie_break,
        parity_measure="bytes",
        parity_rule="devlift",
        parity_reference="en",
        parity_shared=kw["shared"],
        parity_gain=kw["gain"],
        parity_global_merges=kw["global_merges"],
    )
    en = sorted(dev).index("en")
    want, _ = _reference(BIG, dev, 60, measure="bytes", tie_break=tie_break, rule="devlift", reference=en, **kw)
    assert tok.merges == want
