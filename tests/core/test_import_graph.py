"""The package's import graph, computed from the source: no cycle (counting the
imports inside functions too), no arrow up the layers but those listed in
:data:`ALLOWED_UP` (and in ``docs/architecture.md``), and the lower layers
never import ``eval``.

An edge ``a -> b`` is an import that runs when ``a`` is imported: a statement
at module level, including inside a top-level ``if``/``try``/``with`` block
(an ``if TYPE_CHECKING:`` block never runs and is skipped), but not inside a
function or class body (those run later, lazily). ``from pkg import name`` is
an edge to ``pkg.name`` when that is a module of the package, else to ``pkg``.
Importing ``a.b.c`` also runs the ``__init__`` of ``a`` and ``a.b``; those are
the ancestors of the importing module itself in nearly every case, so they are
not counted as edges (an import of a package's own parent would otherwise be a
cycle by construction).

A second check adds the imports inside functions (they run later, but a cycle
among them is still a tangle, and a lazy import is still an import), with no
exception: the registry imports its families (downwards), the command line
finds a family's subcommand module by the name its record gives.

Every module belongs to one layer (:data:`LAYERS`, bottom first); an import,
at module level or inside a function, goes to the same layer or a lower one.

Not handled: ``importlib.import_module`` with a computed name (the record's
class, readers and CLI module: each a module the record names, always one of a
higher layer reaching down), and imports made by ``exec``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tokenforge

PKG_DIR = Path(tokenforge.__file__).parent
PKG = "tokenforge"

#: a module of these may not import tokenforge.eval (directly, at module level or inside a function)
LOWER_LAYERS = (
    "tokenforge.base",
    "tokenforge.registry",
    "tokenforge.bpe",
    "tokenforge.lz78",
    "tokenforge.mixedgram",
    "tokenforge.growing",
    "tokenforge.pipeline",
    "tokenforge.embedding_meta",
    "tokenforge.bpe_structure",
    "tokenforge.torch",
    "tokenforge.data",
    "tokenforge.formats",
)


#: the layers, bottom first: a module belongs to the first prefix it falls under
#: (``docs/architecture.md``, "The layers")
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "foundations",
        (
            "tokenforge._core",
            "tokenforge.errors",
            "tokenforge.progress",
            "tokenforge.chat",
            "tokenforge.embedding_meta",
            "tokenforge.latin1",
            "tokenforge.cluster",
            "tokenforge.offsets",
            "tokenforge.hybrid",
            "tokenforge.surrogates",
            "tokenforge.ids",
            "tokenforge.batching",
            "tokenforge.pickling",
            "tokenforge.reference",
        ),
    ),
    ("formats", ("tokenforge.formats",)),
    ("contract", ("tokenforge.base", "tokenforge.rust_backed")),
    ("data", ("tokenforge.data", "tokenforge.counting")),
    (
        "families",
        (
            "tokenforge.bpe",
            "tokenforge.bpe_structure",
            "tokenforge.bpe_parity",
            "tokenforge.lz78",
            "tokenforge.mixedgram",
            "tokenforge.mixedgram_dist",
            "tokenforge.growing",
            "tokenforge.sync",
            "tokenforge.pipeline",
        ),
    ),
    ("seam", ("tokenforge.registry",)),
    ("torch", ("tokenforge.torch",)),
    ("eval", ("tokenforge.eval",)),
    ("serve", ("tokenforge.serve",)),
    ("cli", ("tokenforge.cli", "tokenforge.__main__")),
    ("public API", ("tokenforge",)),
)

#: imports allowed to run up the layers, each with its reason (none today: every
#: shared piece was moved down instead; add one here and in docs/architecture.md)
ALLOWED_UP: dict[tuple[str, str], str] = {}


def _layer(module: str) -> int:
    for k, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes if p != PKG):
            return k
    if module == PKG:
        return len(LAYERS) - 1
    raise AssertionError(f"{module} is in no layer of LAYERS")


def _modules() -> dict[str, Path]:
    out = {}
    for p in sorted(PKG_DIR.rglob("*.py")):
        rel = p.relative_to(PKG_DIR).with_suffix("")
        parts = [PKG, *rel.parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    for p in sorted(PKG_DIR.rglob("*")):  # compiled extensions (tokenforge._core): leaves of the graph
        if p.suffix in (".so", ".pyd") and not p.name.startswith("."):
            rel = p.relative_to(PKG_DIR)
            out[".".join([PKG, *rel.parent.parts, p.name.split(".")[0]])] = p
    return out


def _is_package(name: str, mods: dict[str, Path]) -> bool:
    return mods[name].name == "__init__.py"


def _resolve(importer: str, node: ast.ImportFrom, mods: dict[str, Path]) -> str:
    if node.level == 0:
        return node.module or ""
    base = importer.split(".")
    if not _is_package(importer, mods):
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _targets(importer: str, node, mods: dict[str, Path]) -> list[str]:
    out = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name.split(".")[0] == PKG:
                out.append(alias.name)
    else:
        mod = _resolve(importer, node, mods)
        if mod.split(".")[0] != PKG:
            return []
        for alias in node.names:
            sub = f"{mod}.{alias.name}"
            out.append(sub if sub in mods else mod)
    return [t for t in out if t in mods]


def _is_type_checking(test) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_time_nodes(body):
    """Import statements that run when the module body runs (not in def/class bodies)."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _import_time_nodes(node.body)
            yield from _import_time_nodes(node.orelse)
        elif isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from _import_time_nodes(block)
        elif isinstance(node, (ast.With, ast.For, ast.While)):
            yield from _import_time_nodes(node.body)
            yield from _import_time_nodes(getattr(node, "orelse", []))


def _graph(lazy_too: bool = False) -> dict[str, set[str]]:
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        if path.suffix != ".py":
            graph[name] = set()
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        nodes = (
            (n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)))
            if lazy_too
            else _import_time_nodes(tree.body)
        )
        edges = set()
        for node in nodes:
            edges.update(t for t in _targets(name, node, mods) if t != name)
        graph[name] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    comps: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


def test_graph_sees_the_package():
    graph = _graph()
    assert "tokenforge.registry" in graph["tokenforge"]  # base and the families are imported lazily
    assert "tokenforge.errors" in graph["tokenforge.base"]


def test_cycle_detector_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle():
    assert _cycles(_graph()) == []


def test_no_cycle_even_through_function_level_imports():
    """The lazy imports inside functions too (the cycles of old were such:
    base -> _register_all -> families -> base, cli/main <-> cli/demo,
    eval/structure <-> eval/bpe_structure, registry -> cli/lz78 -> cli/main ->
    registry, bpe -> registry -> bpe). No exception: the whole graph is a DAG."""
    assert _cycles(_graph(lazy_too=True)) == []


def test_every_module_has_a_layer():
    for name in _graph():
        _layer(name)


def test_no_import_runs_up_the_layers_but_the_allowed_ones():
    up = {}
    for name, edges in _graph(lazy_too=True).items():
        for t in edges:
            if _layer(t) > _layer(name):
                up[(name, t)] = f"{LAYERS[_layer(name)][0]} -> {LAYERS[_layer(t)][0]}"
    assert sorted(set(up) - set(ALLOWED_UP)) == []
    assert sorted(set(ALLOWED_UP) - set(up)) == []  # an allowance no import uses is dropped


def test_the_layer_check_sees_an_upward_arrow():
    assert _layer("tokenforge.data.shards") < _layer("tokenforge.registry") < _layer("tokenforge.cli.main")
    assert _layer("tokenforge") == len(LAYERS) - 1 and _layer("tokenforge.formats.kinds") == 1


def test_lower_layers_never_import_eval():
    bad = []
    for name, edges in _graph(lazy_too=True).items():
        if not any(name == low or name.startswith(low + ".") for low in LOWER_LAYERS):
            continue
        bad += [f"{name} -> {t}" for t in sorted(edges) if t == "tokenforge.eval" or t.startswith("tokenforge.eval.")]
    assert bad == []


def test_eval_never_imports_the_package_root():
    # eval reads the families through the registry, not through `import tokenforge`
    bad = [name for name, edges in _graph(lazy_too=True).items() if name.startswith("tokenforge.eval") and PKG in edges]
    assert bad == []
