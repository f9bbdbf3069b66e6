"""Imported tokenizers everywhere a tokenizer goes (issue 31, item 2): the
playground with their own hover detail (the piece, its score or merge rank),
``pretokenize`` into a ShardSet, ``tokenforge inspect``. (``compare`` and the
bits-per-byte harness: test_imported_compare.py; the Dask path:
tests/data/test_shards_distributed.py, whose families include this one.)
"""

from __future__ import annotations

import numpy as np
import pytest
from imported_models import hf_pair, spm_pair

from tiny_corpus import TINY_DOCS
from tokenforge.cli.main import main
from tokenforge.data.corpus import Texts
from tokenforge.data.shards import pretokenize

TEXT = "hello world, the theory of tokenizers: naïve café 🙂"


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("everywhere")


@pytest.fixture(scope="module")
def toks(models_dir):
    return {
        "spm-unigram": spm_pair("unigram-bytes", models_dir)[1],
        "spm-bpe": spm_pair("bpe", models_dir)[1],
        "hf-unigram": hf_pair("unigram-nfkc-bytes", models_dir)[1],
        "hf-wordpiece": hf_pair("wordpiece-bert", models_dir)[1],
        "hf-bpe": hf_pair("bpe-llama", models_dir)[1],
    }


def test_the_playground_serves_them_with_their_own_detail(toks):
    from starlette.testclient import TestClient

    from tokenforge.serve import create_app

    with TestClient(create_app(toks)) as c:
        listed = {t["name"]: t["family"] for t in c.get("/api/tokenizers").json()["tokenizers"]}
        assert listed == {name: "pipeline" for name in toks}
        for name, tok in toks.items():
            out = c.post("/api/encode", json={"tokenizer": name, "text": TEXT, "details": True}).json()
            assert out["ids"] == tok.encode(TEXT), name
            for i in set(out["ids"]):
                d = out["details"][str(i)]
                if "special" in d:  # BERT's [UNK], Llama's <unk> (added tokens)
                    assert tok.special_tokens[d["special"]] == i
                    continue
                assert d["piece"] == tok.piece(i), name
                if name in ("spm-unigram", "spm-bpe", "hf-unigram"):
                    assert d["score"] == pytest.approx(tok.piece_detail(i)["score"])
                elif name == "hf-bpe":
                    assert "rank" in d and (d["rank"] is None or d["left"] + d["right"] == d["piece"])
                else:
                    assert d["continuation"] == d["piece"].startswith("##")


def test_pretokenize_writes_their_ids_and_byte_counts(toks, tmp_path):
    for name, tok in toks.items():
        has_bos = "<s>" in tok.special_tokens or "[CLS]" in tok.special_tokens  # not the Unigram with only <unk>
        shards = pretokenize(Texts(TINY_DOCS), tok, tmp_path / name, num_threads=2, bos=has_bos, progress=False)
        shards.verify()
        bos = [tok.get_bos_token_id()] if has_bos else []
        stream = np.concatenate([np.asarray(shards.tokens(i)) for i in range(shards.num_shards)]).tolist()
        assert stream == [i for d in TINY_DOCS for i in [*bos, *tok.encode(d)]], name
        assert shards.num_bytes == sum(len(tok.normalize(d).encode("utf-8")) for d in TINY_DOCS), name
        shards.check_tokenizer(tok)


def test_inspect_names_the_form_and_the_model(models_dir, capsys):
    for path in (spm_pair("unigram-bytes", models_dir)[2], hf_pair("wordpiece-bert", models_dir)[2]):
        assert main(["inspect", str(path)]) == 0
        out = capsys.readouterr().out
        assert "pipeline" in out and ("sentencepiece-model" in out or "tokenizer.json-pipeline" in out), out
        assert ("UNIGRAM" in out) or ("WordPiece" in out), out
