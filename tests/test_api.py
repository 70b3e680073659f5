"""``__all__`` lists exactly the public names each module defines (house rule 3)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import skillsynth

# every public module, subpackages' modules included (skillsynth.cli.models, ...)
MODULES = [m.name.removeprefix("skillsynth.")
           for m in pkgutil.walk_packages(skillsynth.__path__, "skillsynth.")
           if not any(part.startswith("_") for part in m.name.split("."))]


def test_every_public_module_has_an_honest_all():
    assert {"cli", "cli.models", "evaluation.sweeps.run", "corpora.tau2",
            "models.chat_models", "pipeline.synthesize", "store.memory",
            "evaluation.live.worlds.tau2", "evaluation.point.run"} <= set(MODULES)
    for name in MODULES:
        mod = importlib.import_module(f"skillsynth.{name}")
        assert hasattr(mod, "__all__"), f"skillsynth.{name} has no __all__"
        exported = set(mod.__all__)
        # a package that only documents its modules exports nothing, honestly
        assert exported or mod.__file__.endswith("__init__.py"), f"skillsynth.{name}: empty"
        for n in exported:
            assert hasattr(mod, n), f"skillsynth.{name}.__all__ names missing {n}"
        defined = {n for n, obj in vars(mod).items()
                   if not n.startswith("_")
                   and (inspect.isclass(obj) or inspect.isfunction(obj))
                   and getattr(obj, "__module__", None) == mod.__name__}
        assert defined <= exported, f"skillsynth.{name} does not export {defined - exported}"


def test_package_all_resolves():
    for n in skillsynth.__all__:
        assert hasattr(skillsynth, n), n


def _imports(path):
    """The skillsynth modules a source file imports (relative imports resolved)."""
    import ast

    rel = path.relative_to(PKG.parent).with_suffix("")
    pkg = list(rel.parts[:-1])  # the package a relative import starts from
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg[:len(pkg) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            if name.startswith("skillsynth"):
                out.add(name)
                out |= {f"{name}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("skillsynth")}
    return out


PKG = Path(skillsynth.__file__).resolve().parent


def test_layers_import_only_downwards():
    from skillsynth.pipeline import STAGES

    upper = ("skillsynth.evaluation", "skillsynth.cli", "skillsynth.corpora",
             "skillsynth.bench", "skillsynth.demo", "skillsynth.figures")
    for layer in ("store", "models", "pipeline"):
        for f in sorted((PKG / layer).glob("*.py")):
            bad = {m for m in _imports(f) if m.startswith(upper)}
            assert not bad, f"{f.relative_to(PKG)} imports {bad}"
    for i, stage in enumerate(STAGES):
        later = {f"skillsynth.pipeline.{s}" for s in STAGES[i + 1:]}
        bad = _imports(PKG / "pipeline" / f"{stage}.py") & later
        assert not bad, f"stage {stage} imports a later stage: {bad}"
    assert set(STAGES) == {f.stem for f in (PKG / "pipeline").glob("*.py")} - {"__init__"}


#: evaluation/'s sub-packages, lowest first: each imports only from those before it.
EVALUATION_LAYERS = ("strategies", "live", "point", "tuning", "sweeps", "reporting")


def test_evaluation_sub_packages_import_one_way_and_no_private_name_crosses_modules():
    ev = PKG / "evaluation"
    assert {p.name for p in ev.iterdir() if p.is_dir() and (p / "__init__.py").exists()} \
        == set(EVALUATION_LAYERS)
    assert {f.name for f in ev.glob("*.py")} == {"__init__.py"}  # every module has a room
    for i, layer in enumerate(EVALUATION_LAYERS):
        later = tuple(f"skillsynth.evaluation.{x}" for x in EVALUATION_LAYERS[i + 1:])
        for f in sorted((ev / layer).rglob("*.py")):
            bad = {m for m in _imports(f) if m.startswith(later)}
            assert not bad, f"{f.relative_to(PKG)} imports a later sub-package: {bad}"
    for f in sorted(ev.rglob("*.py")):
        here = "skillsynth." + ".".join(f.relative_to(PKG).parent.parts)
        private = {m for m in _imports(f)
                   if m.rsplit(".", 1)[-1].startswith("_") and not m.endswith("__version__")
                   # a package's private module, used inside its own package, is its own
                   and not (m.rsplit(".", 1)[0] == here and (f.parent / (
                       m.rsplit(".", 1)[-1] + ".py")).exists())}
        assert not private, f"{f.relative_to(PKG)} imports private names {private}"


def test_no_module_is_over_500_lines():
    sizes = {str(f.relative_to(PKG)): len(f.read_text(encoding="utf-8").splitlines())
             for f in PKG.rglob("*.py")}
    assert {f: n for f, n in sizes.items() if n > 500} == {}


def test_every_import_in_the_package_resolves_also_inside_functions():
    # a function-level import runs only when its function does: check every one exists
    import importlib.util

    for f in sorted(PKG.rglob("*.py")):
        for name in _imports(f):
            parent, _, leaf = name.rpartition(".")
            try:
                if importlib.util.find_spec(name) is not None:
                    continue  # a module
            except ModuleNotFoundError:  # its parent is a module, not a package
                pass
            mod = importlib.import_module(parent)  # `from x import name`: a name of x
            assert hasattr(mod, leaf), \
                f"{f.relative_to(PKG)} imports {name}, which does not exist"


def _module_name(path):
    """``skillsynth.a.b`` for ``skillsynth/a/b.py`` and for ``skillsynth/a/b/__init__.py``."""
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_graph():
    """Each skillsynth module -> the skillsynth modules it names in any import: at the top,
    under ``if TYPE_CHECKING:``, or inside a function (``from pkg import name`` counts as
    an import of ``pkg.name`` where that is a module, else of ``pkg``)."""
    import ast

    files = {_module_name(f): f for f in PKG.rglob("*.py")}
    graph = {}
    for name, f in files.items():
        package = name.split(".") if f.name == "__init__.py" else name.split(".")[:-1]
        out = set()
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = package[:len(package) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                out |= {f"{target}.{a.name}" if f"{target}.{a.name}" in files else target
                        for a in node.names}
            elif isinstance(node, ast.Import):
                out |= {a.name for a in node.names}
        graph[name] = {m for m in out if m in files and m != name}
    return graph


def _cycles(graph):
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_among_modules_type_only_and_deferred_imports_included():
    graph = _module_graph()
    assert "skillsynth.evaluation.point.run" in graph["skillsynth.evaluation"]  # it sees edges
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles(graph) == []


def test_no_name_defined_or_imported_from_skillsynth_shadows_a_typing_name():
    import ast
    import typing

    for f in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                names = {node.name}
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = {t.id for t in targets if isinstance(t, ast.Name)}
            elif isinstance(node, ast.ImportFrom) and (
                    node.level or (node.module or "").startswith("skillsynth")):
                names = {a.asname or a.name for a in node.names}
            else:
                continue
            shadowing = names & set(typing.__all__)
            assert not shadowing, f"{f.relative_to(PKG)}:{node.lineno} defines {shadowing}"


def test_every_record_with_more_than_one_argument_is_built_by_keyword():
    import ast

    records = set()
    trees = {f: ast.parse(f.read_text(encoding="utf-8")) for f in sorted(PKG.rglob("*.py"))}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and (
                    any("dataclass" in ast.unparse(d) for d in node.decorator_list)
                    or any(ast.unparse(b) == "NamedTuple" for b in node.bases)):
                records.add(node.name)
    assert {"AgentRun", "PassReport", "ProbeResult", "KPI"} <= records
    for f, tree in trees.items():
        owner = {}  # a call's innermost class (``cls(...)`` in a record's classmethod)
        for c in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            owner |= {id(n): c.name for n in ast.walk(c)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and len(node.args) > 1:
                func = node.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                name = owner.get(id(node)) if name == "cls" else name
                assert name not in records, \
                    f"{f.relative_to(PKG)}:{node.lineno}: {name}(...) by position"
