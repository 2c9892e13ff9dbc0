"""`torchpod run` checks the script before the rendezvous (torchpod.script)."""

from __future__ import annotations

import pytest

from torchpod import script
from torchpod.errors import InputError

WHERE = "node 1 (gpu002)"


def check(name, tmp_path, *passthrough, env=None):
    script.check(name, passthrough, cwd=tmp_path, env=env or {"PATH": "/usr/bin:/bin"}, where=WHERE)


def test_a_readable_file_passes(tmp_path):
    (tmp_path / "train.py").write_text("print(1)\n")
    check("train.py", tmp_path)
    check(str(tmp_path / "train.py"), tmp_path / "elsewhere")  # absolute paths stay absolute


@pytest.mark.parametrize("name, needle", [
    ("trian.py", "does not exist on node 1 (gpu002), working directory {cwd}"),
    ("data", "is a directory on node 1 (gpu002)"),
])
def test_missing_or_directory_is_one_line_naming_path_node_and_cwd(tmp_path, name, needle):
    (tmp_path / "data").mkdir()
    with pytest.raises(InputError) as info:
        check(name, tmp_path)
    message = str(info.value)
    assert needle.format(cwd=tmp_path) in message and str(tmp_path / name) in message
    assert "\n" not in message and "expected" in message


def test_module_is_found_without_importing_it_or_its_parents(tmp_path):
    pkg = tmp_path / "proj" / "train"
    pkg.mkdir(parents=True)
    # importing either file would fail the test: the check must only locate them
    (tmp_path / "proj" / "__init__.py").write_text("raise SystemExit('imported the parent')\n")
    (pkg / "__init__.py").write_text("raise SystemExit('imported the package')\n")
    (pkg / "main.py").write_text("raise SystemExit('imported the module')\n")
    check("proj.train.main", tmp_path, "--module")
    check("main", tmp_path, "--module", env={"PYTHONPATH": str(pkg)})
    with pytest.raises(InputError, match="module 'proj.train.missing' is not importable on node 1"):
        check("proj.train.missing", tmp_path, "--module")
    with pytest.raises(InputError, match="module 'proj.train.main.x' is not importable"):
        check("proj.train.main.x", tmp_path, "--module")  # a module holds no submodules


def test_no_python_wants_an_executable(tmp_path):
    tool = tmp_path / "run.sh"
    tool.write_text("#!/bin/sh\n")
    with pytest.raises(InputError, match="'./run.sh' is not an executable file"):
        check("./run.sh", tmp_path, "--no-python")
    tool.chmod(0o755)
    check("./run.sh", tmp_path, "--no-python")
    check("run.sh", tmp_path, "--no-python", env={"PATH": str(tmp_path)})


@pytest.mark.parametrize("name, passthrough, needle", [
    ("x" * 300, (), "cannot be read on node 1 (gpu002), working directory {cwd} (File name too long)"),
    ("x" * 300 + ".py/a", (), "cannot be read on node 1"),
    ("train.py/inner.py", (), "does not exist on node 1"),  # below a file: ENOTDIR is a missing path
    ("/dev/null", (), "is a character device on node 1"),
    ("fifo", (), "is a FIFO (named pipe) on node 1"),
    ("x" * 300, ("--module",), "is not importable"),
    ("a." * 200 + "b", ("--module",), "is not importable"),
    ("x" * 300, ("--no-python",), "is not an executable file"),
    ("./fifo", ("--no-python",), "is not an executable file"),
])
def test_any_oserror_or_special_file_is_one_line_naming_the_path(tmp_path, name, passthrough, needle):
    """A 300-character name (ENAMETOOLONG) was a traceback; a FIFO 'did not exist'."""
    import os

    (tmp_path / "train.py").write_text("")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(InputError) as info:
        check(name, tmp_path, *passthrough)
    message = str(info.value)
    assert needle.format(cwd=tmp_path) in message and "\n" not in message and "expected" in message
