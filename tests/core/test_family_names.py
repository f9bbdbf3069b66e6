"""The record is the only outsider that knows a family (issue 33, item 2).

A grep over the package's source (with ``ast``, not by importing): a string that
*is* a built-in family's name (``"lz78"``), a spec of it (``"lz78:frequency_gated"``)
or a comma-separated list of specs holding one (``"bpe,lz78"``) appears only in

- the family's own modules: its record's ``module`` and that module's
  companions (``tokenforge.bpe`` and ``tokenforge.bpe_parity``, ...),
- its format modules (``tokenforge/formats/<name>_*.py``),
- its command-line module (the record's ``cli``),
- and the record itself (``tokenforge/registry.py``).

Such a string anywhere else is a per-family table or an ``if family == ...``
branch, which a new family would have to be added to: give the family a record
field or a hook instead. Prose (messages, docstrings) that mentions a family is
not counted.

Not handled: a family's name built at run time (``"lz" + "78"``) or spelt in
another case; names in comments.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import tokenforge
from tokenforge import registry

PKG_DIR = Path(tokenforge.__file__).parent
_SPEC = re.compile(r"[a-z][a-z0-9_-]*(:[^,\s]*)?\Z")


def _module_name(path: Path) -> str:
    parts = ["tokenforge", *path.relative_to(PKG_DIR).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _names_in(value: str, families) -> set[str]:
    """The families a string constant names: the whole string, or each item of a comma-separated list of specs."""
    parts = value.split(",")
    if len(parts) > 1 and not all(_SPEC.match(p) for p in parts):
        return set()  # prose with a comma, not a list of specs
    return {f for f in families for p in parts if p == f or p.startswith(f + ":")}


def _docstrings(tree) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _owners(name: str) -> set[str]:
    fam = registry.FAMILIES[name]
    return {fam.module, "tokenforge.registry", *([fam.cli] if fam.cli else [])}


def _owns(module: str, name: str) -> bool:
    fam = registry.FAMILIES[name]
    return (
        module in _owners(name)
        or module.startswith(fam.module + "_")
        or module.startswith(f"tokenforge.formats.{name}_")
    )


def places_naming(families) -> dict[str, list[str]]:
    """``{family: ["module:line", ...]}``: where each family's name appears as a string of the code."""
    out: dict[str, list[str]] = {f: [] for f in families}
    for path in sorted(PKG_DIR.rglob("*.py")):
        module = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                for f in _names_in(node.value, families):
                    out[f].append(f"{module}:{node.lineno}")
    return out


def test_each_family_is_named_only_by_its_own_modules_and_the_record():
    strays = {
        f: [place for place in places if not _owns(place.split(":")[0], f)]
        for f, places in places_naming(registry.BUILT_IN).items()
    }
    assert strays == {f: [] for f in registry.BUILT_IN}


def test_the_grep_finds_what_it_looks_for():
    found = places_naming(registry.BUILT_IN)
    for f in registry.BUILT_IN:  # every family's own module names it (its class's `family`)
        assert any(p.startswith(registry.FAMILIES[f].module + ":") for p in found[f]), f
    assert any(p.startswith("tokenforge.registry:") for p in found["lz78"])
    assert _names_in("bpe,lz78:frequency_gated:nochunk", ["bpe", "lz78"]) == {"bpe", "lz78"}
    assert _names_in("lz78", ["lz78"]) == {"lz78"} and _names_in("lz78:all", ["lz78"]) == {"lz78"}
    assert _names_in("the bpe tokenizer, with lz78", ["bpe", "lz78"]) == set()  # prose
    assert _names_in("bpe_structure", ["bpe"]) == set()
