"""Code-health counts for the tree (issue 13): one AST scan, printed as plain text.

    python scripts/code_health.py [ROOT]        # ROOT defaults to the repository root

Counts, over the tracked-style Python files under specverify/, scripts/, gpu_runs/, tests/ and
properties/ of ROOT:
- functions longer than 50 and 60 lines (first line of the def to its last line), the longest listed;
- lines over 120 characters (all of ROOT's .py files, and those under specverify/), the longest;
- functions annotated (every parameter but self/cls and the return) over all functions, per package
  of specverify/;
- private names imported across packages (``from specverify.stats._stream import X``,
  ``from ..catalogue._engine import Y``, ``from specverify.audit.pipeline.run import _concat``);
- import cycles between specverify modules (module-level imports, and all imports);
- imports inside functions, in specverify/;
- positional constructions of the result objects (GofResult, Verdict, CheckOutcome);
- bare status strings compared in specverify/ ("PASS" == ...), outside the module that defines them;
- public top-level functions of specverify/ that nothing references (tests included).
"""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

TREES = ("specverify", "scripts", "gpu_runs", "tests", "properties")
RESULT_CLASSES = ("GofResult", "Verdict", "CheckOutcome")
STATUS_STRINGS = {"PASS", "FAIL", "INCONCLUSIVE", "ERROR", "SKIPPED", "EXACT"}
SKIP_PARTS = {".venv", ".engines", "__pycache__", "build", "dist"}


def python_files(root: Path) -> list[Path]:
    out: list[Path] = []
    for tree in TREES:
        base = root / tree
        if base.is_dir():
            out.extend(p for p in sorted(base.rglob("*.py")) if not SKIP_PARTS & set(p.parts))
    return out


def module_name(root: Path, path: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def resolve_from(mod: str, pkg: bool, node: ast.ImportFrom) -> str:
    """The absolute module named by a ``from ... import`` in module ``mod``."""
    if node.level == 0:
        return node.module or ""
    base = mod.split(".")
    if not pkg:
        base = base[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def package_of(mod: str) -> str:
    """``specverify.stats._gof`` -> ``specverify.stats``; top-level modules are their own package."""
    parts = mod.split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else mod


def functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def fully_annotated(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    args = fn.args
    params = args.posonlyargs + args.args + args.kwonlyargs
    if params and params[0].arg in ("self", "cls"):
        params = params[1:]
    params += [a for a in (args.vararg, args.kwarg) if a is not None]
    return fn.returns is not None and all(p.annotation is not None for p in params)


def inside_function_imports(tree: ast.AST) -> list[ast.stmt]:
    found: list[ast.stmt] = []
    for fn in functions(tree):
        for node in ast.walk(fn):
            if isinstance(node, ast.Import | ast.ImportFrom) and node is not fn:
                found.append(node)
    return found


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
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
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


@dataclass
class Tree:
    root: Path
    files: list[Path]
    parsed: dict[Path, ast.Module]
    mods: dict[Path, str]
    lib: set[Path]

    @classmethod
    def load(cls, root: Path) -> Tree:
        files = python_files(root)
        return cls(
            root=root,
            files=files,
            parsed={p: ast.parse(p.read_text(encoding="utf-8"), filename=str(p)) for p in files},
            mods={p: module_name(root, p) for p in files},
            lib={p for p in files if p.relative_to(root).parts[0] == "specverify"},
        )

    def rel(self, p: Path) -> str:
        return str(p.relative_to(self.root))


def report_lengths(t: Tree) -> None:
    lengths = []
    for p, tree in t.parsed.items():
        for fn in functions(tree):
            n = (fn.end_lineno or fn.lineno) - fn.lineno + 1
            lengths.append((n, f"{t.rel(p)}::{fn.name}"))
    lengths.sort(reverse=True)
    unexplained = 0
    for p, tree in t.parsed.items():
        lines = p.read_text(encoding="utf-8").splitlines()
        for fn in functions(tree):
            if (fn.end_lineno or fn.lineno) - fn.lineno + 1 > 60:
                first = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
                window = lines[max(0, first - 2) : fn.body[0].lineno]
                unexplained += not any(re.search(r"#\s*long:\s*\S", line) for line in window)
    print("== function lengths (all trees) ==")
    print(
        f"functions: {len(lengths)}; over 50 lines: {sum(n > 50 for n, _ in lengths)}; "
        f"over 60 lines: {sum(n > 60 for n, _ in lengths)}; over 60 without a '# long:' reason: {unexplained}"
    )
    for n, name in lengths:
        if n > 50:
            print(f"  {n:4d}  {name}")


def report_long_lines(t: Tree) -> None:
    long_all: list[tuple[int, str]] = []
    for p in t.files:
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if len(line) > 120:
                long_all.append((len(line), f"{t.rel(p)}:{i}"))
    long_lib = [x for x in long_all if x[1].startswith("specverify/")]
    print("== lines over 120 characters ==")
    print(
        f"all trees: {len(long_all)}; under specverify/: {len(long_lib)}; "
        f"longest: {max(long_all)[0] if long_all else 0}"
    )


def report_annotations(t: Tree) -> None:
    print("== fully annotated functions, specverify/ ==")
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for p in t.lib:
        pkg = package_of(t.mods[p])
        for fn in functions(t.parsed[p]):
            per[pkg][1] += 1
            per[pkg][0] += fully_annotated(fn)
    print(f"total: {sum(v[0] for v in per.values())} of {sum(v[1] for v in per.values())}")
    for pkg in sorted(per):
        print(f"  {pkg:28s} {per[pkg][0]:4d} of {per[pkg][1]:4d}")
    print(f"py.typed shipped: {(t.root / 'specverify' / 'py.typed').exists()}")


def imported(mod: str, pkg: bool, node: ast.stmt) -> list[tuple[str, list[str]]]:
    """(module, names) pairs that an import statement brings in."""
    if isinstance(node, ast.ImportFrom):
        return [(resolve_from(mod, pkg, node), [a.name for a in node.names])]
    if isinstance(node, ast.Import):
        return [(a.name, []) for a in node.names]
    return []


def is_private(src: str, names: list[str]) -> bool:
    def private(x: str) -> bool:
        return x.startswith("_") and not x.startswith("__")

    return any(private(x) for x in src.split(".")) or any(private(n) for n in names)


def report_imports(t: Tree) -> None:
    lib_mods = {t.mods[p] for p in t.lib}
    private: list[str] = []
    graph_top: dict[str, set[str]] = defaultdict(set)
    graph_all: dict[str, set[str]] = defaultdict(set)
    inner = 0
    for p, tree in t.parsed.items():
        mod = t.mods[p]
        nested = {id(n) for n in inside_function_imports(tree)}
        inner += len(nested) if p in t.lib else 0
        for node in ast.walk(tree):
            for src, names in imported(mod, is_package(p), node) if isinstance(node, ast.stmt) else []:
                if not src.startswith("specverify"):
                    continue
                # a name imported from a package may itself be a submodule
                deps = {src} | {f"{src}.{n}" for n in names}
                for d in deps & lib_mods - {mod} if p in t.lib else ():
                    graph_all[mod].add(d)
                    if id(node) not in nested:
                        graph_top[mod].add(d)
                same_package = p in t.lib and package_of(src) == package_of(mod)
                if not same_package and is_private(src, names):
                    private.append(f"{t.rel(p)}:{node.lineno}: from {src} import {', '.join(names)}")
    print("== private names imported across packages ==")
    lib_private = [x for x in private if x.startswith("specverify/")]
    print(f"all trees: {len(private)}; from specverify/: {len(lib_private)}")
    for line in private:
        print(f"  {line}")

    # a package importing its own submodules is not a cycle worth reporting: drop package -> child edges
    def strip(g: dict[str, set[str]]) -> dict[str, set[str]]:
        return {k: {d for d in v if not d.startswith(k + ".")} for k, v in g.items()}

    top = find_cycles(strip(graph_top))
    every = find_cycles(strip(graph_all))
    print("== import cycles between specverify modules ==")
    print(f"module-level imports: {len(top)} {top}")
    print(f"all imports (function-level too): {len(every)} {every}")
    print(f"imports inside functions, specverify/: {inner}")


def call_name(node: ast.Call) -> str:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def report_results_and_statuses(t: Tree) -> None:
    print("== positional constructions of result objects ==")
    pos: dict[str, int] = defaultdict(int)
    for tree in t.parsed.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and call_name(node) in RESULT_CLASSES and node.args:
                pos[call_name(node)] += 1
    for cls in RESULT_CLASSES:
        print(f"  {cls}: {pos[cls]}")
    bare = 0
    for p in t.lib:
        if p.name == "_verdict.py":
            continue
        for node in ast.walk(t.parsed[p]):
            if isinstance(node, ast.Compare):
                consts = [c for c in [node.left, *node.comparators] if isinstance(c, ast.Constant)]
                bare += sum(c.value in STATUS_STRINGS for c in consts)
    print(f"== bare status strings compared in specverify/ (outside _verdict.py): {bare} ==")


def report_unused(t: Tree) -> None:
    refs: dict[str, int] = defaultdict(int)
    for tree in t.parsed.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                refs[node.id] += 1
            elif isinstance(node, ast.Attribute):
                refs[node.attr] += 1
    unused = []
    for p in t.lib:
        for node in t.parsed[p].body:
            if (
                isinstance(node, ast.FunctionDef)
                and not node.name.startswith(("_", "pytest_"))
                and not node.decorator_list  # fixtures, registered hooks
                and refs[node.name] == 0
            ):
                unused.append(f"{t.rel(p)}::{node.name}")
    print(f"== public top-level functions of specverify/ referenced nowhere: {len(unused)} ==")
    for u in sorted(unused):
        print(f"  {u}")


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else Path(__file__).resolve().parent.parent).resolve()
    t = Tree.load(root)
    report_lengths(t)
    report_long_lines(t)
    report_annotations(t)
    report_imports(t)
    report_results_and_statuses(t)
    report_unused(t)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
