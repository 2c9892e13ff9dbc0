"""docker/payload/shards.py, run as payload.sh runs it: the staged lock split into shards of
about equal bytes, and the shards' trees merged into one site-packages, refusing a file two
wheels write differently."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from paths import ROOT

SHARDS = ROOT / "docker" / "payload" / "shards.py"


# as payload.sh runs it: no bytecode written beside the reader's copy
QUIET = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}


def _run(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SHARDS), *map(str, args)], capture_output=True, text=True, env=QUIET)


def _staged(tmp_path, sizes: dict[str, int]):
    """A staged folder as wheelhouse.stage writes it: one wheel of each size and locked.txt."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    lines = []
    for name, size in sizes.items():
        (wheels / f"{name}-1.0-py3-none-any.whl").write_bytes(b"x" * size)
        lines.append(f"{name}==1.0 --hash=sha256:{'a' * 64}  # {name}-1.0-py3-none-any.whl\n")
    (wheels / "locked.txt").write_text("".join(lines))
    return wheels, lines


def test_split_balances_bytes_largest_first_and_keeps_the_lock_order_in_each_shard(tmp_path):
    wheels, lines = _staged(tmp_path, {"a": 10, "b": 50, "c": 30, "d": 40, "e": 20})
    done = _run("split", wheels / "locked.txt", wheels, 2, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(tmp_path / "out" / "0.txt"), str(tmp_path / "out" / "1.txt")]
    # 50 -> 0, 40 -> 1, 30 -> 1, 20 -> 0 (tie: the lower), 10 -> 0: 80 and 70 bytes
    assert (tmp_path / "out" / "0.txt").read_text() == lines[0] + lines[1] + lines[4]
    assert (tmp_path / "out" / "1.txt").read_text() == lines[2] + lines[3]
    again = _run("split", wheels / "locked.txt", wheels, 2, tmp_path / "again")
    assert again.returncode == 0 and (tmp_path / "again" / "0.txt").read_bytes() == (
        tmp_path / "out" / "0.txt").read_bytes()


@pytest.mark.parametrize("count, files", [(0, 1), (1, 1), (3, 3), (64, 4)])
def test_split_writes_no_empty_shard_and_at_most_four(tmp_path, count, files):
    wheels, lines = _staged(tmp_path, {"a": 5, "b": 4, "c": 3, "d": 2, "e": 1, "f": 1})
    done = _run("split", wheels / "locked.txt", wheels, count, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    written = sorted((tmp_path / "out").iterdir())
    assert len(written) == files and all(p.read_text() for p in written)
    assert sorted(line for p in written for line in p.read_text().splitlines(keepends=True)) == sorted(lines)


@pytest.mark.parametrize("line", [
    "a==1.0 --hash=sha256:aa",  # no file named
    "a==1.0 --hash=sha256:aa  # missing-1.0-py3-none-any.whl",  # not staged
    "a==1.0 --hash=sha256:aa  # ../wheels/a-1.0-py3-none-any.whl",  # outside the folder
    "a==1.0 --hash=sha256:aa  # ..",  # a folder
    "a==1.0 --hash=sha256:aa  # \x1b[2Jwheel",
])
def test_split_refuses_a_line_that_names_no_staged_wheel_in_one_line_and_writes_nothing(tmp_path, line):
    wheels, _ = _staged(tmp_path, {"a": 5})
    (wheels / "locked.txt").write_text(line + "\n")
    done = _run("split", wheels / "locked.txt", wheels, 2, tmp_path / "out")
    assert done.returncode == 1 and not (tmp_path / "out").exists()
    message = done.stderr.strip()
    assert message.startswith("payload: ") and "line 1 names no staged wheel" in message
    assert "\n" not in message and "\x1b" not in message


def _fifo(path):
    os.mkfifo(path)


def _binary(path):
    path.write_bytes(b"a==1.0 --hash=sha256:aa  # \xff\xfe.whl\n")


def _huge(path):
    with open(path, "wb") as f:
        f.truncate((1 << 20) + 1)  # a sparse file: one byte past the cap


@pytest.mark.parametrize("make, says", [
    (_fifo, "is a FIFO (named pipe); expected a regular file"),  # would block the build's read for ever
    (os.mkdir, "is a directory; expected a regular file"),
    (_binary, "not UTF-8 text (first at byte 27)"),
    (_huge, "is 1048577 bytes, over the 1 MiB cap"),  # refused from its size: not a byte read
    (lambda path: None, "No such file or directory"),
])
def test_split_refuses_a_staged_lock_that_is_no_lock_text_in_one_line(tmp_path, make, says):
    wheels, _ = _staged(tmp_path, {"a": 5})
    (wheels / "locked.txt").unlink()
    make(wheels / "locked.txt")
    try:
        done = subprocess.run([sys.executable, str(SHARDS), "split", str(wheels / "locked.txt"), str(wheels), "2",
                               str(tmp_path / "out")], capture_output=True, text=True, timeout=60, env=QUIET)
    except subprocess.TimeoutExpired:
        pytest.fail("shards.py split did not end")  # a hang guard only
    message = done.stderr.strip()
    assert done.returncode == 1 and not (tmp_path / "out").exists()
    assert message.startswith(f"payload: {wheels / 'locked.txt'}") and says in message and "\n" not in message
    assert "Traceback" not in done.stderr


def _tree(root, files: dict[str, bytes]):
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def _files(root) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_merge_joins_shared_folders_drops_bin_and_accepts_a_file_both_write_alike(tmp_path):
    site = _tree(tmp_path / "site", {"old.py": b"kept"})
    one = _tree(tmp_path / "one", {"nvidia/__init__.py": b"", "nvidia/cublas/lib.so": b"1", "pkg/a.py": b"a",
                                   "bin/tool": b"#!1"})
    two = _tree(tmp_path / "two", {"nvidia/__init__.py": b"", "nvidia/nccl/lib.so": b"2", "b.py": b"b",
                                   "bin/tool": b"#!2"})
    done = _run("merge", site, one, two)
    assert done.returncode == 0, done.stderr
    assert _files(site) == {"old.py": b"kept", "nvidia/__init__.py": b"", "nvidia/cublas/lib.so": b"1",
                            "pkg/a.py": b"a", "nvidia/nccl/lib.so": b"2", "b.py": b"b"}
    assert not one.exists() and not two.exists()


@pytest.mark.parametrize("second", [
    {"nvidia/__init__.py": b"# other"},  # the same file, other bytes
    {"nvidia": b"a file where the other shard has a folder"},
    {"pkg/a.py/x": b"a folder where the other shard has a file"},
])
def test_merge_refuses_what_two_wheels_write_differently_naming_the_path(tmp_path, second):
    site = (tmp_path / "site")
    site.mkdir()
    one = _tree(tmp_path / "one", {"nvidia/__init__.py": b"", "pkg/a.py": b"a"})
    two = _tree(tmp_path / "two", second)
    done = _run("merge", site, one, two)
    assert done.returncode == 1
    message = done.stderr.strip()
    assert message.startswith("payload: two wheels of the lock write ") and str(site) in message
    assert "\n" not in message


@pytest.mark.parametrize("args", [(), ("split", "a", "b"), ("split", "l", "w", "two", "o"), ("merge",), ("wheel",)])
def test_a_call_outside_its_two_forms_is_one_line(args):
    done = _run(*args)
    assert done.returncode == 1 and done.stderr.startswith("payload: shards.py ") and done.stderr.count("\n") == 1
