"""``import tokenforge`` is cheap: the families, numpy, the corpus readers and
the optional extras are imported when a name that needs them is first used
(the package's PEP 562 ``__getattr__``), and every public name still resolves.

Each check runs in a fresh interpreter, since this test process has long
imported everything.
"""

from __future__ import annotations

import json
import subprocess
import sys

import tokenforge

# modules that a bare `import tokenforge` must not import
NOT_ON_IMPORT = (
    "numpy",
    "torch",
    "tokenforge.base",
    "tokenforge.bpe",
    "tokenforge.lz78",
    "tokenforge.mixedgram",
    "tokenforge.growing",
    "tokenforge.sync",
    "tokenforge.counting",
    "tokenforge.data.corpus",
    "tokenforge.torch",
    "tokenforge.eval",
    "tokenforge.cli",
)


def _loaded_after(code: str, watch) -> list[str]:
    """The modules of ``watch`` that are imported after running ``code`` in a fresh interpreter."""
    probe = f"import sys, json\n{code}\nprint(json.dumps([m for m in {list(watch)!r} if m in sys.modules]))"
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1])


def test_import_tokenforge_imports_no_family_and_no_numpy():
    assert _loaded_after("import tokenforge", NOT_ON_IMPORT) == []


def test_loading_a_bpe_file_imports_neither_the_other_families_nor_numpy(tmp_path):
    path = tmp_path / "tiny.tiktoken"
    tokenforge.BPETokenizer.train_from_iterator(["hello world, hello there"] * 20, 265).save_tiktoken(path)
    # encode only: the core's decode accepts a numpy array of ids, so it asks for numpy
    code = (
        f"import tokenforge\ntok = tokenforge.BPETokenizer.from_tiktoken({str(path)!r}, 'gpt4')\n"
        "assert tok.encode('hello world')"
    )
    loaded = _loaded_after(code, NOT_ON_IMPORT)
    assert loaded == ["tokenforge.base", "tokenforge.bpe"]


def test_a_family_is_imported_when_first_named():
    code = "import tokenforge\ntokenforge.LZ78Tokenizer"
    loaded = _loaded_after(code, ("tokenforge.lz78", "tokenforge.mixedgram", "tokenforge.growing"))
    assert loaded == ["tokenforge.lz78"]


def test_every_public_name_resolves_in_a_fresh_interpreter():
    code = (
        "import tokenforge\n"
        "missing = [n for n in tokenforge.__all__ if getattr(tokenforge, n, None) is None]\n"
        "assert not missing, missing\n"
        "from tokenforge import *  # noqa: F403\n"
        "from tokenforge import BPETokenizer, IdBatch, Mixedgram, SPECIAL_TOKENS, Tokenizer\n"
        "assert issubclass(BPETokenizer, Tokenizer) and tokenforge.Mixedgram is Mixedgram\n"
        "assert set(tokenforge.__all__) <= set(dir(tokenforge))"
    )
    _loaded_after(code, ())


def test_every_public_name_is_the_defining_modules_object():
    from tokenforge import base, bpe, chat, growing, lz78, mixedgram

    for name in tokenforge.__all__:
        assert getattr(tokenforge, name) is not None, name
    assert tokenforge.BPETokenizer is bpe.BPETokenizer
    assert tokenforge.GrowingBPETokenizer is growing.GrowingBPETokenizer
    assert tokenforge.NeuroTokenizer is growing.NeuroTokenizer
    assert tokenforge.LZ78Tokenizer is lz78.LZ78Tokenizer
    assert tokenforge.Mixedgram is mixedgram.Mixedgram
    assert tokenforge.Tokenizer is base.Tokenizer and tokenforge.IdBatch is base.IdBatch
    assert tokenforge.SPECIAL_TOKENS is chat.SPECIAL_TOKENS


def test_an_unknown_name_is_an_attribute_error():
    import pytest

    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        tokenforge.Nope  # noqa: B018
    assert not hasattr(tokenforge, "Nope")


def test_numpy_integers_are_ids_without_numpy_being_imported_for_ints():
    import numpy as np

    from tokenforge.base import is_integer

    assert is_integer(3) and is_integer(np.int64(3)) and is_integer(np.uint16(3))
    assert not is_integer(True) and not is_integer(np.bool_(True)) and not is_integer(3.0) and not is_integer("3")
    assert _loaded_after("from tokenforge.base import is_integer\nassert is_integer(5)", ("numpy",)) == []
