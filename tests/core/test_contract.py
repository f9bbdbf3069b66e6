"""One contract every family keeps (``tokenforge.base.Tokenizer``).

Every built-in family defines the contract's training and loading
(``train``, ``train_from_iterator``, ``load``), and its ``encode`` takes the
contract's parameters, in the contract's order, with the contract's kinds (a
family may add keyword-only ones after them: mixedgram's ``parse``). Other
modules reach a tokenizer only through public names: no module of the package
calls a ``_``-named member of a tokenizer (``tok._x``) outside the family's own
module. The growing vocabulary's seed encode is ``encode_for_model``.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokenforge
from tokenforge import registry
from tokenforge.base import Tokenizer, special_stretches

PKG_DIR = Path(tokenforge.__file__).parent

#: names that hold a tokenizer in the package's code (what the test below reads)
TOKENIZER_NAMES = ("tok", "tokenizer", "tk")


@pytest.mark.parametrize("name", registry.BUILT_IN)
def test_every_family_trains_and_loads_through_the_contract(name):
    cls = registry.FAMILIES[name].cls
    assert issubclass(cls, Tokenizer)
    for member in ("train", "train_from_iterator", "load"):
        assert member in vars(Tokenizer), member  # declared on the contract
        assert any(member in vars(k) for k in cls.__mro__[: cls.__mro__.index(Tokenizer)]), (name, member)


@pytest.mark.parametrize("name", registry.BUILT_IN)
def test_every_family_encodes_with_the_contracts_signature(name):
    cls = registry.FAMILIES[name].cls
    want = list(inspect.signature(Tokenizer.encode).parameters.values())
    got = list(inspect.signature(cls.encode).parameters.values())
    assert [(p.name, p.kind) for p in got[: len(want)]] == [(p.name, p.kind) for p in want], name
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in got[len(want) :]), name


def test_the_growing_vocabularys_seed_encode_has_its_own_name():
    from tokenforge import GrowingBPETokenizer

    assert "encode" not in vars(GrowingBPETokenizer)  # the contract's, inherited
    params = inspect.signature(GrowingBPETokenizer.encode_for_model).parameters
    assert list(params)[:6] == ["self", "text", "add_special_tokens", "max_length", "truncation", "padding"]


def test_no_module_calls_a_private_member_of_a_tokenizer():
    found = []
    for path in sorted(PKG_DIR.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in TOKENIZER_NAMES
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                found.append(f"{path.relative_to(PKG_DIR)}:{node.lineno}: {node.value.id}.{node.attr}")
    # a family's own module may reach into the tokenizer it is building
    own = {"bpe.py", "growing.py", "mixedgram.py", "lz78.py"}
    assert [f for f in found if f.split(":")[0] not in own] == []


def _stretches_by_scanning(text: str, allowed: dict[str, int]) -> list[tuple[int, int, int | None]]:
    """The split as first written: every name searched for again after each special."""
    out: list[tuple[int, int, int | None]] = []
    names = sorted(allowed, key=len, reverse=True)
    i = 0
    while True:
        best = None
        for name in names:
            j = text.find(name, i)
            if j != -1 and (best is None or j < best[0]):
                best = (j, name)
        if best is None:
            out.append((i, len(text), None))
            return out
        out.append((i, best[0], allowed[best[1]]))
        i = best[0] + len(best[1])


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(alphabet="ab<|>x", max_size=40),
    names=st.lists(st.text(alphabet="ab<|>", min_size=1, max_size=4), max_size=4, unique=True),
)
def test_special_stretches_is_the_leftmost_longest_split(text: str, names: list[str]) -> None:
    """special_stretches (the one split base's and the pipeline's specials use)
    gives the leftmost-then-longest split, and the pieces put back are the text."""

    allowed = {name: 1000 + k for k, name in enumerate(names)}
    got = list(special_stretches(text, allowed))
    assert got == _stretches_by_scanning(text, allowed)
    back = {v: k for k, v in allowed.items()}
    assert "".join(text[a:b] + (back[s] if s is not None else "") for a, b, s in got) == text
    assert list(special_stretches("a<|x|>b<|x|>", {"<|x|>": 7, "<|x": 8})) == [(0, 1, 7), (6, 7, 7), (12, 12, None)]
