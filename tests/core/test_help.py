"""help(), inspect.signature and --version show what a user needs (issue 35, item 3)."""

from __future__ import annotations

import inspect
import pydoc

import pytest

import tokenforge
from tokenforge import BPETokenizer, Mixedgram


@pytest.mark.parametrize("method", [BPETokenizer.train, BPETokenizer().train, Mixedgram.train])
def test_class_or_instance_methods_show_their_own_signature_and_doc(method):
    sig = inspect.signature(method)
    assert list(sig.parameters)[:2] == ["corpus", "vocab_size"]
    assert "cls" not in sig.parameters and "self" not in sig.parameters
    doc = pydoc.render_doc(method, renderer=pydoc.plaintext)
    assert "partial" not in doc
    assert method.__doc__ and method.__doc__.strip().split()[0] in doc


def test_class_or_instance_still_trains_from_the_class_and_in_place(tiny_docs):
    tok = BPETokenizer.train_from_iterator(tiny_docs, 300)
    assert isinstance(tok, BPETokenizer)


def test_version_flag(capsys):
    from tokenforge.cli.main import main

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"tokenforge {tokenforge.__version__}"
