"""Both packages' imports, read from the source with ``ast``: no module reaches itself through
its imports, and the launcher imports torch only in the modules ARCHITECTURE.md names.

Every import statement counts wherever it sits: at module level, inside a function, under
``if TYPE_CHECKING:``. An import moved into a function to get past a circle leaves the
circle in place (the two modules still need each other; only the moment it bites moves to
the first call), and a TYPE_CHECKING import is a circle for mypy and for the reader.

What counts as an edge from module M:

- ``import a.b.c``: to ``a.b.c`` (the deepest of ``a``, ``a.b``, ``a.b.c`` that is a module here);
- ``from X import n``: to the submodule ``X.n`` when there is one, else to ``X`` itself (for a
  package, its ``__init__``); relative imports are resolved against M's package first.

Importing a submodule ``a.b`` also runs ``a/__init__.py`` first. That step is *not* an edge:
Python registers the package before its ``__init__`` runs, so the implicit step never fails by
itself, and counting it would make every ``__init__`` that imports one of its own submodules a
circle. What an ``__init__`` imports is an edge like any other, and so is a submodule taking
a name from its package's ``__init__`` (``from . import NAME`` where NAME is no submodule):
the two together are a circle, the one that fails with "cannot import name ... (most likely
due to a circular import)" depending on which module a program imports first.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from paths import ROOT

PACKAGES = {"torchpod": ROOT / "entrypoints" / "torchpod", "torchpod_toolkit": ROOT / "toolkit" / "torchpod_toolkit"}


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    path: Path
    line: int

    def __str__(self) -> str:
        return f"{self.source} imports {self.target} ({self.path.name}:{self.line})"


def modules(packages: dict[str, Path]) -> dict[str, Path]:
    """Dotted module name -> its file, for every ``.py`` file of ``packages`` (name -> folder)."""
    found = {}
    for name, folder in packages.items():
        for path in sorted(folder.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = [name, *path.relative_to(folder).with_suffix("").parts]
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _package_of(module: str, path: Path) -> list[str]:
    """The package a relative import of ``module`` starts from (a package's own name for its __init__)."""
    return module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]


def _deepest(dotted: str, known: dict[str, Path]) -> str | None:
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in known:
            return ".".join(parts[:n])
    return None


def _targets(node: ast.stmt, module: str, path: Path, known: dict[str, Path]) -> list[str]:
    """The modules of ``known`` one import statement reaches."""
    if isinstance(node, ast.Import):
        return [t for t in (_deepest(a.name, known) for a in node.names) if t]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        base = _package_of(module, path)
        base = base[:len(base) - node.level + 1]
        origin = ".".join([*base, *([node.module] if node.module else [])])
    else:
        origin = node.module or ""
    out = []
    for alias in node.names:
        sub = f"{origin}.{alias.name}"
        target = sub if sub in known else _deepest(origin, known)
        if target:
            out.append(target)
    return out


def import_edges(known: dict[str, Path]) -> list[Edge]:
    """Every import between modules of ``known``, from every statement anywhere in each file."""
    edges = []
    for module, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges += [Edge(module, t, path, node.lineno) for t in _targets(node, module, path, known)]
    return edges


def circles(edges: list[Edge]) -> list[list[str]]:
    """The strongly connected components with more than one module, and every module that
    imports itself, each sorted (Tarjan's algorithm, without recursion)."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.source, set()).add(e.target)
        graph.setdefault(e.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    part = stack[stack.index(node):]
                    del stack[stack.index(node):]
                    if len(part) > 1 or node in graph[node]:
                        found.append(sorted(part))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in stack:
                low[node] = min(low[node], index[child])
    return sorted(found)


def describe(circle: list[str], edges: list[Edge]) -> str:
    """One circle as the imports that make it, each with its file and line."""
    inside = sorted({str(e) for e in edges if e.source in circle and e.target in circle})
    return f"circle {' <-> '.join(circle)}: " + "; ".join(inside)


def test_neither_package_has_an_import_circle():
    # a name two modules both need moves down into a module both import
    edges = import_edges(modules(PACKAGES))
    found = [describe(c, edges) for c in circles(edges)]
    assert found == [], "\n".join(found)


def _tree(root: Path, files: dict[str, str]) -> dict[str, Path]:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return modules({"pkg": root / "pkg"})


def test_the_walk_finds_a_circle_hidden_in_a_function(tmp_path):
    known = _tree(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "from .b import helper\n",
                             "pkg/b.py": "def later():\n    from .a import thing\n",
                             "pkg/c.py": "import pkg.a\n"})  # c reaches the circle but is on none
    edges = import_edges(known)
    assert circles(edges) == [["pkg.a", "pkg.b"]]
    assert "pkg.b imports pkg.a (b.py:2)" in describe(["pkg.a", "pkg.b"], edges)


def test_the_walk_finds_type_checking_and_deeper_relative_imports(tmp_path):
    known = _tree(tmp_path, {"pkg/__init__.py": "", "pkg/sub/__init__.py": "",
                             "pkg/sub/deep.py": "from ..top import x\n",
                             "pkg/top.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                           "    from pkg.sub import deep\n"})
    assert circles(import_edges(known)) == [["pkg.sub.deep", "pkg.top"]]


def test_an_init_and_a_submodule_taking_a_name_from_it_are_a_circle(tmp_path):
    # the package's __init__ imports its submodule, which takes a name the __init__ defines
    known = _tree(tmp_path, {"pkg/__init__.py": "from . import standalone\nORDER = ()\n",
                             "pkg/standalone.py": "from . import ORDER\n"})
    assert circles(import_edges(known)) == [["pkg", "pkg.standalone"]]


def test_a_sibling_module_taken_from_the_package_is_no_edge_to_its_init(tmp_path):
    # `from . import markers` reaches the submodule markers, not the __init__ that imports us
    known = _tree(tmp_path, {"pkg/__init__.py": "from . import standalone\n",
                             "pkg/standalone.py": "from . import markers\n", "pkg/markers.py": ""})
    edges = import_edges(known)
    assert {(e.source, e.target) for e in edges} == {("pkg", "pkg.standalone"), ("pkg.standalone", "pkg.markers")}
    assert circles(edges) == []


def test_a_module_importing_itself_is_a_circle(tmp_path):
    known = _tree(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "def f():\n    import pkg.a\n"})
    assert circles(import_edges(known)) == [["pkg.a"]]


# --- where the launcher imports torch ----------------------------------------------------------

ARCHITECTURE = ROOT / "ARCHITECTURE.md"


def importers(known: dict[str, Path], top: str) -> list[str]:
    """The modules of ``known`` with an import of ``top`` (or a module under it) anywhere, as
    names relative to their package (``torchrun``, ``fabric.sysfs``)."""
    found = []
    for module, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            if any(n == top or n.startswith(top + ".") for n in names):
                found.append(module.split(".", 1)[1] if "." in module else module)
                break
    return sorted(found)


def stated_importers(text: str, top: str) -> list[str]:
    """The launcher modules ARCHITECTURE.md's table says import ``top``: "`torch` only in `a`, `b` and `c`"."""
    name = r"`[\w.]+`"
    said = re.search(rf"`{re.escape(top)}` only in ({name}(?:, {name})* and {name}|{name})", text)
    assert said, f"ARCHITECTURE.md no longer says where the launcher imports {top}"
    return sorted(re.findall(r"`([\w.]+)`", said.group(1)))


@pytest.mark.parametrize("top", ["torch", "torchvision"])
def test_the_launcher_imports_torch_only_where_the_architecture_says(top):
    launcher = modules({"torchpod": PACKAGES["torchpod"]})
    assert importers(launcher, top) == stated_importers(ARCHITECTURE.read_text(encoding="utf-8"), top)


def test_the_torch_finder_reads_imports_inside_functions_and_not_lookalikes(tmp_path):
    known = _tree(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "def f():\n    import torch.distributed as d\n",
                             "pkg/b.py": "from torch.distributed.run import main\n",
                             "pkg/c.py": "import torchpod\nfrom . import torch\n", "pkg/torch.py": ""})
    assert importers(known, "torch") == ["a", "b"]
    assert stated_importers("`torch` only in `b`, `a` and `x.y`, not", "torch") == ["a", "b", "x.y"]
