"""Every file read in both packages, bench/ and the payload's build script goes through the
one bounded reader (torchpod.readers), as CONTRIBUTING.md says: no ``Path.read_text``,
``read_bytes``, reading ``open`` or ``os.open`` outside it, but where ALLOWED names the
place and its reason. Found by walking each module's syntax tree, so a read inside a
function, a method or a lambda is found as well."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from paths import ROOT

SCOPE = ("entrypoints", "toolkit", "bench", "docker")
# the reader itself, and its byte-for-byte copy for the payload's build
READER = ("entrypoints/torchpod/readers.py", "docker/payload/reader/")
# (module, function): why it reads directly
ALLOWED = {
    ("toolkit/torchpod_toolkit/manifests/submit.py", "submit"): "hands the job file torchpod rendered, or "
                                                                  "/dev/null, to the scheduler's tool as its stdin; "
                                                                  "torchpod reads none of it",
}
_WRITES = ("w", "a", "x", "+")
_WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_CREAT")


def _mode(call: ast.Call, position: int) -> str | None:
    """The mode a call to open passes (positional at ``position``, or ``mode=``), when literal."""
    node = call.args[position] if len(call.args) > position else next(
        (k.value for k in call.keywords if k.arg == "mode"), None)
    if node is None:
        return "r"
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def reads(source: str) -> list[tuple[int, str, str]]:
    """(line, enclosing function, what) for each direct read in ``source``."""
    found: list[tuple[int, str, str]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if isinstance(child, ast.Call):
                what = _read_call(child)
                if what:
                    found.append((child.lineno, function, what))
            visit(child, inner)

    visit(ast.parse(source), "<module>")
    return found


def _read_call(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in ("read_text", "read_bytes"):
        owner = func.value
        if not (isinstance(owner, ast.Name) and owner.id == "readers"):
            return f".{func.attr}()"
    if isinstance(func, ast.Name) and func.id == "open":
        if call.args and _from_the_reader(call.args[0]):
            return None
        mode = _mode(call, 1)
        if mode is None or not any(c in mode for c in _WRITES):
            return "open()"
    if isinstance(func, ast.Attribute) and func.attr == "open":
        owner = func.value
        if isinstance(owner, ast.Name) and owner.id == "os":
            flags = ast.unparse(call.args[1]) if len(call.args) > 1 else ""
            return None if any(f in flags for f in _WRITE_FLAGS) else "os.open()"
        if any(k.arg == "fileobj" for k in call.keywords) or (
                call.args and not (isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str))):
            return None  # an archive over bytes at hand, or a member of one (Path.open's first word is a mode)
        mode = _mode(call, 0)
        if mode is None or not any(c in mode for c in _WRITES):
            return ".open()"
    return None


def _from_the_reader(node: ast.AST) -> bool:
    """A descriptor the reader opened (``readers.open_regular``): what it was checked to be."""
    return isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Attribute) and node.func.attr == "open_regular")
        or (isinstance(node.func, ast.Name) and node.func.id == "open_regular"))


def _modules() -> list[Path]:
    return sorted(p for top in SCOPE for p in (ROOT / top).rglob("*.py")
                  if "__pycache__" not in p.parts and not str(p.relative_to(ROOT)).startswith(READER))


def test_every_file_is_read_through_the_bounded_reader():
    direct = []
    for path in _modules():
        rel = str(path.relative_to(ROOT))
        for line, function, what in reads(path.read_text(encoding="utf-8")):
            if (rel, function) not in ALLOWED:
                direct.append(f"{rel}:{line} {what} in {function}")
    assert not direct, "read these through torchpod.readers (or name the place and why in ALLOWED): " + \
        "; ".join(direct)


def test_every_allowed_place_still_reads():
    """An entry whose module no longer reads there is one to remove."""
    places = {(str(p.relative_to(ROOT)), function) for p in _modules()
              for _, function, _ in reads(p.read_text(encoding="utf-8"))}
    assert set(ALLOWED) <= places, set(ALLOWED) - places


@pytest.mark.parametrize("source, found", [
    ("from pathlib import Path\ndef f(p): return Path(p).read_text()", [(2, "f", ".read_text()")]),
    ("class C:\n    def m(self):\n        return (lambda: self.p.read_bytes())()", [(3, "m", ".read_bytes()")]),
    ("def f(p):\n    with open(p) as h: return h.read()", [(2, "f", "open()")]),
    ("def f(p, m):\n    return open(p, m)", [(2, "f", "open()")]),  # a mode not written out may read
    ("def f(p):\n    with p.open('rb') as h: return h.read()", [(2, "f", ".open()")]),
    ("import os\ndef f(p): return os.open(p, os.O_RDONLY)", [(2, "f", "os.open()")]),
    ("def f(p):\n    open(p, 'w').write('x')\n    p.open(mode='a')", []),
    ("import os\ndef f(p): return os.open(p, os.O_WRONLY | os.O_CREAT)", []),
    ("from torchpod import readers\ndef f(p): return readers.read_text(p, what='', expected='', cap=1)", []),
    ("def f(p):\n    with open(readers.open_regular(p, '', '', None), 'rb') as h: return h.read()", []),
    ("import io, tarfile\ndef f(b): return tarfile.open(fileobj=io.BytesIO(b))", []),
    ("def f(zip, name):\n    with zip.open(name) as m: return m.read()", []),
])
def test_the_walk_finds_reads_and_not_writes(source, found):
    assert reads(source) == found
