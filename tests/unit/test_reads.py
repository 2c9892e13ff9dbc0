"""Every file read in both packages, tasks.py, bench/ and the payload's build script goes
through the one bounded reader (torchpod.readers), as CONTRIBUTING.md says: no
``Path.read_text``, ``read_bytes``, reading ``open`` (the builtin, a path's, io's, gzip's,
tarfile's and their kin), ``os.open`` without O_WRONLY, shutil's copies or ``filecmp.cmp``
outside it, but where ALLOWED names the place and its reason. Found by walking each
module's syntax tree, so a read inside a function, a method or a lambda is found as well.
An opener taken as a value (``o = open``, ``map(Path.read_text, ...)``, ``partial(os.open,
...)``) or imported under a name (``from io import open as o``) is found too: where it is
called cannot be followed, so the place that takes it is named."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from paths import ROOT

SCOPE = ("entrypoints", "toolkit", "bench", "docker", "tasks.py")
# the reader itself, and its byte-for-byte copy for the payload's build
READER = ("entrypoints/torchpod/readers.py", "docker/payload/reader/")
# (module, function): why it reads directly
ALLOWED = {
    ("toolkit/torchpod_toolkit/manifests/submit.py", "submit"): "hands the job file torchpod rendered, or "
                                                                  "/dev/null, to the scheduler's tool as its stdin; "
                                                                  "torchpod reads none of it",
    ("toolkit/torchpod_toolkit/imagebuild/wheelhouse.py", "generator"): "a member of a wheel the reader opened, "
                                                                        "inflated to WHEEL_FILE_CAP + 1 bytes at most",
    ("toolkit/torchpod_toolkit/imagebuild/wheelhouse.py", "_link"): "a stored wheel, named by its checked sha256, "
                                                                    "copied where a hard link cannot reach",
    ("toolkit/torchpod_toolkit/imagebuild/sources.py", "stage_netplugin_source"): "the plugin's tarball, its "
                                                                                  "sha256 checked first, copied",
    ("docker/payload/shards.py", "merge_into"): "compares two regular files (checked, links not followed) that "
                                                "pip has just written, byte for byte, streamed",
}
_WRITE_ONLY = ("w", "a", "x")  # a mode with one of these and no "+" only writes
_WRITE_FLAGS = ("O_WRONLY",)  # os.open's flags that open for writing alone
_PATH_OPENERS = ("io", "gzip", "bz2", "lzma", "codecs", "tarfile", "zipfile")  # mod.open(path, mode)
_COPIERS = {("shutil", "copy"), ("shutil", "copy2"), ("shutil", "copyfile"), ("filecmp", "cmp")}


def _literal(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _mode(call: ast.Call, position: int) -> str | None:
    """The mode a call to open passes (positional at ``position``, or ``mode=``): "r" when
    none is given, None when it is not written out."""
    node = call.args[position] if len(call.args) > position else next(
        (k.value for k in call.keywords if k.arg == "mode"), None)
    return "r" if node is None else _literal(node)


def _reads(mode: str | None) -> bool:
    return mode is None or "+" in mode or not any(c in mode for c in _WRITE_ONLY)


def reads(source: str) -> list[tuple[int, str, str]]:
    """(line, enclosing function, what) for each direct read in ``source``."""
    found: list[tuple[int, str, str]] = []

    tree = ast.parse(source)
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            what = _read_call(child) if isinstance(child, ast.Call) else None
            if id(child) not in called:
                what = what or _opener_as_value(child)
            if what:
                found.append((child.lineno, function, what))
            visit(child, inner)

    visit(tree, "<module>")
    return found


_OPENERS = ("open", "read_text", "read_bytes")


def _opener_as_value(node: ast.AST) -> str | None:
    """An opener named without being called here: bound, passed or imported under a name."""
    if isinstance(node, ast.Name) and node.id == "open" and isinstance(node.ctx, ast.Load):
        return "open as a value"
    if isinstance(node, ast.Attribute) and node.attr in _OPENERS and isinstance(node.ctx, ast.Load):
        owner = node.value.id if isinstance(node.value, ast.Name) else ""
        return None if owner == "readers" else f"{owner}.{node.attr} as a value"
    if isinstance(node, ast.ImportFrom):
        taken = [a.name for a in node.names if (a.name == "open" and node.module in ("builtins", "os", *_PATH_OPENERS))
                 or (node.module, a.name) in _COPIERS]
        return f"import of {node.module}.{taken[0]}" if taken else None
    return None


def _read_call(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name) and func.id == "open":
        if call.args and _from_the_reader(call.args[0]):
            return None
        return "open()" if _reads(_mode(call, 1)) else None
    if not isinstance(func, ast.Attribute):
        return None
    owner = func.value.id if isinstance(func.value, ast.Name) else None
    if func.attr in ("read_text", "read_bytes"):
        return None if owner == "readers" else f".{func.attr}()"
    if (owner, func.attr) in _COPIERS:
        return f"{owner}.{func.attr}()"
    if func.attr != "open" or any(k.arg == "fileobj" for k in call.keywords):
        return None  # an archive over bytes already at hand reads no file
    if owner == "os":
        flags = ast.unparse(call.args[1]) if len(call.args) > 1 else ""
        return None if any(f in flags for f in _WRITE_FLAGS) else "os.open()"
    if owner in _PATH_OPENERS:
        return f"{owner}.open()" if _reads(_mode(call, 1)) else None
    return ".open()" if _reads(_mode(call, 0)) else None  # Path.open(mode), or a member of an archive


def _from_the_reader(node: ast.AST) -> bool:
    """A descriptor the reader opened (``readers.open_regular``): what it was checked to be."""
    return isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Attribute) and node.func.attr == "open_regular")
        or (isinstance(node.func, ast.Name) and node.func.id == "open_regular"))


def _modules() -> list[Path]:
    files = [p for top in SCOPE for p in ((ROOT / top).rglob("*.py") if (ROOT / top).is_dir() else [ROOT / top])]
    return sorted(p for p in files if "__pycache__" not in p.parts and not str(p.relative_to(ROOT)).startswith(READER))


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
    ("def f(zip, name):\n    with zip.open(name) as m: return m.read()", [(2, "f", ".open()")]),  # a place to allow
    ("import gzip, io\ndef f(p): return gzip.open(p).read() + io.open(p).read()",
     [(2, "f", "gzip.open()"), (2, "f", "io.open()")]),
    ("import tarfile\ndef f(): return tarfile.open('a.tar')", [(2, "f", "tarfile.open()")]),  # a path, not a mode
    ("import tarfile\ndef f(): return tarfile.open('a.tar', 'w')", []),
    ("def f(p):\n    return open(p, 'r+'), p.open('a+')", [(2, "f", "open()"), (2, "f", ".open()")]),  # + reads
    ("import os\ndef f(p): return os.open(p, os.O_RDWR | os.O_CREAT)", [(2, "f", "os.open()")]),
    ("import shutil, filecmp\ndef f(a, b): shutil.copyfile(a, b); return filecmp.cmp(a, b)",
     [(2, "f", "shutil.copyfile()"), (2, "f", "filecmp.cmp()")]),
    ("def f(p):\n    o = open\n    return o(p).read()", [(2, "f", "open as a value")]),
    ("from pathlib import Path\ndef f(ps): return list(map(Path.read_text, ps))",
     [(2, "f", "Path.read_text as a value")]),
    ("import functools, os\ndef f(p): return functools.partial(os.open, p)", [(2, "f", "os.open as a value")]),
    ("from io import open as o\ndef f(p): return o(p)", [(1, "<module>", "import of io.open")]),
    ("from shutil import copyfile\ndef f(a, b): copyfile(a, b)", [(1, "<module>", "import of shutil.copyfile")]),
    ("from torchpod import readers\ndef f(ps): return map(readers.read_text, ps)", []),
    ("from torchpod.readers import read_text\nfrom .definition_yaml import read_text as r", []),
])
def test_the_walk_finds_reads_and_not_writes(source, found):
    assert reads(source) == found
