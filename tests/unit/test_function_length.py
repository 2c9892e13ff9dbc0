"""No function in either package, the benches or tasks.py is over 60 lines: a longer one
is split into named steps a reader takes in one at a time. Counted from ``def`` to its
last line, docstring and comments included, as a reader meets it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import torchpod
import torchpod_toolkit

from paths import ROOT

LIMIT = 60
PACKAGES = [Path(torchpod.__file__).parent, Path(torchpod_toolkit.__file__).parent]
# the programs around them, held to the same limit: bench's programs, the _helpers they import, tasks.py
PROGRAMS = sorted((ROOT / "bench").glob("*.py")) + [ROOT / "tasks.py"]


def long_functions(source: str, limit: int = LIMIT) -> list[tuple[str, int]]:
    """(qualified name, lines) of each function in ``source`` longer than ``limit``."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    lines = (child.end_lineno or child.lineno) - child.lineno + 1
                    if lines > limit:
                        found.append((name, lines))
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


@pytest.mark.parametrize("path", sorted(p for pkg in PACKAGES for p in pkg.rglob("*.py")) + PROGRAMS,
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_function_is_over_the_limit(path):
    assert long_functions(path.read_text()) == [], f"{path}: split these into named steps"


def _function(head: str, body_lines: int, indent: str = "") -> str:
    body = "".join(f"{indent}    x{i} = {i}\n" for i in range(body_lines))
    return f"{indent}{head}\n{body}"


def test_the_count_sees_nested_and_method_bodies():
    source = ("class A:\n" + _function("def m(self):", LIMIT, "    ")
              + "def outer():\n" + _function("def inner():", LIMIT, "    ") + "    return inner\n")
    assert long_functions(source) == [("A.m", LIMIT + 1), ("outer", LIMIT + 3), ("outer.inner", LIMIT + 1)]
    assert long_functions(_function("def f():", LIMIT - 1)) == []  # exactly at the limit is fine
    assert long_functions(_function("async def f():", LIMIT)) == [("f", LIMIT + 1)]
