"""The shape of the Python package, read from its source with ``ast`` (nothing is imported, so
neither libthreelc.so nor torch is needed):

- the threelc modules import one another without a cycle, counting imports at module level
  and inside functions alike (relative imports resolved; ``from pkg import name`` counts as
  an import of ``pkg.name`` when that is a module, else of ``pkg``);
- no .py file under frameworks/python is over 600 lines.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Optional, Set

PYTHON_ROOT = Path(__file__).resolve().parents[3] / "frameworks" / "python"
PACKAGE = "threelc"
MAX_LINES = 600


def module_files(root: Path, package: str) -> Dict[str, Path]:
    """Dotted module name -> file, for every module of `package` under `root`."""
    modules = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _base_of_relative(module: str, is_package: bool, level: int, name: Optional[str]) -> str:
    """The absolute name `from <level dots><name> import ...` refers to inside `module`."""
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]  # a plain module's imports are relative to its package
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts + ([name] if name else []))


def imports_of(module: str, path: Path, known: Set[str]) -> Set[str]:
    """The modules of `known` that `module` imports, anywhere in its file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    found.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _base_of_relative(module, is_package, node.level, node.module)
            else:
                base = node.module or ""
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in known:
                    found.add(submodule)
                elif base in known:
                    found.add(base)
    found.discard(module)  # `from . import name` in a package reads its own attribute
    return found


def import_graph(root: Path, package: str) -> Dict[str, Set[str]]:
    modules = module_files(root, package)
    known = set(modules)
    return {name: imports_of(name, path, known) for name, path in modules.items()}


def find_cycle(graph: Dict[str, Set[str]]) -> Optional[List[str]]:
    """A cycle of `graph` as [a, b, ..., a], or None."""
    state: Dict[str, int] = {}  # 1: on the current path, 2: done
    path: List[str] = []

    def visit(node: str) -> Optional[List[str]]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_package_has_no_import_cycle():
    graph = import_graph(PYTHON_ROOT, PACKAGE)
    assert f"{PACKAGE}.engine" in graph and f"{PACKAGE}.torch.ops" in graph
    # The reader resolves relative imports (`from .. import engine`, `from ._library import lib`).
    assert f"{PACKAGE}.engine" in graph[f"{PACKAGE}.torch.ops"]
    assert f"{PACKAGE}._library" in graph[PACKAGE]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_finder_sees_imports_inside_functions(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from . import a\n")
    (package / "sub" / "a.py").write_text("from ..b import thing\n")
    (package / "b.py").write_text("def f():\n    from .sub import a\n    return a\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.sub"] == {"pkg.sub.a"}
    assert graph["pkg.sub.a"] == {"pkg.b"}
    assert graph["pkg.b"] == {"pkg.sub.a"}
    assert find_cycle(graph) == ["pkg.b", "pkg.sub.a", "pkg.b"]


def test_no_python_file_is_over_600_lines():
    too_long = {}
    for path in sorted(PYTHON_ROOT.rglob("*.py")):
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES:
            too_long[str(path.relative_to(PYTHON_ROOT))] = lines
    assert not too_long, f"over {MAX_LINES} lines (split them by job): {too_long}"
