"""torchpod_toolkit.imagebuild.locks: the committed locks parse, match their definitions and refuse every
hand edit, stray file or stale definition in one line; a pip report becomes lock lines."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchpod.arch import ARCHES
from torchpod.errors import InputError
from torchpod_toolkit.imagebuild import locks
from torchpod_toolkit.imagebuild.definitions import load_definitions

from paths import ROOT

DEFS = load_definitions(ROOT / "images")
DEFN = DEFS["pytorch"]
X86, ARM = ARCHES["x86_64"], ARCHES["aarch64"]
CI = [(d, a) for d in DEFS.values() if d.ci for a in d.arches]


@pytest.mark.parametrize("defn, arch", CI, ids=[f"{d.name}-{a.name}" for d, a in CI])
def test_every_ci_definition_has_both_locks_matching_it(defn, arch):
    wheels = locks.load(ROOT / "images", defn, arch, debian=False)
    debs = locks.load(ROOT / "images", defn, arch, debian=True)
    names = {w.name: w for w in wheels.entries}
    assert names["torch"].version == defn.torch.version and names["pip"]
    # the file locked for torch is a wheel for this arch and this Python
    torch_file = names["torch"].file
    assert torch_file.endswith(f"_{arch.name}.whl") and f"cp{defn.python.replace('.', '')}" in torch_file
    assert all(w.file.endswith(("-any.whl", f"_{arch.name}.whl")) for w in wheels.entries if not w.sdist)
    assert [w.name for w in wheels.entries if w.sdist] == ["python-etcd"]
    base = {d.name for d in debs.entries if d.layer == "base"}
    assert {"python3", "libibverbs1", "libc6"} <= base
    assert {d.name for d in debs.entries if d.layer == "apt"} >= set(locks.apt_packages(defn))
    assert locks.driver_floor(wheels) in ("580", "525.60.13")


def test_no_lock_belongs_to_no_definition():
    assert locks.stray(ROOT / "images", DEFS) == []


def _copy(tmp_path: Path) -> Path:
    images = tmp_path / "images"
    shutil.copytree(ROOT / "images", images)
    return images



def _edit(images: Path, old: str, new: str, name="pytorch-x86_64.txt") -> None:
    path = images / "locks" / name
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize("old, new, needle", [
    ("--hash=sha256:", "--hash=sha256:zz", "line 6: 'cuda-bindings==13.5.0 --hash=sha256:zz"),
    ("  # cuda_bindings", " # cuda_bindings", "expected NAME==VERSION --hash=sha256:<64 hex>  # FILE"),
    ("cuda-bindings==", "cuda-bindings>=", "line 6"),
    ("cuda-bindings==13.5.0 ", "cuda-bindings==13.5.0 --index-url=http://evil ", "line 6"),
    ("# inputs: ", "# inputs: 0", "images/pytorch.yaml changed since this lock was written"),
    ("# image: pytorch", "# image: pytorch-newest", "says image 'pytorch-newest'"),
    ("# arch: x86_64", "# arch: aarch64", "a copied lock?"),
    ("# arch: x86_64\n", "", "no '# arch: ...' header line"),
])
def test_a_hand_edited_wheel_lock_is_one_line_naming_the_file_and_the_entry(tmp_path, old, new, needle):
    images = _copy(tmp_path)
    _edit(images, old, new)
    with pytest.raises(InputError) as info:
        locks.load(images, DEFN, X86, debian=False)
    message = str(info.value)
    assert needle in message and "pytorch-x86_64.txt" in message and "\n" not in message


def test_a_line_locked_twice_or_a_pin_edited_in_the_lock_is_refused(tmp_path):
    images = _copy(tmp_path)
    path = images / "locks" / "pytorch-x86_64.txt"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines, lines[-1]]) + "\n")
    with pytest.raises(InputError, match="is locked twice"):
        locks.load(images, DEFN, X86, debian=False)
    text = "\n".join(lines).replace("numpy==2.4.6 ", "numpy==2.4.5 ")
    path.write_text(text + "\n")
    with pytest.raises(InputError, match=r"locks numpy==2.4.5, pytorch.yaml pins numpy==2.4.6"):
        locks.load(images, DEFN, X86, debian=False)


def test_a_definition_changed_without_relocking_names_the_command(tmp_path):
    changed = replace(DEFN, torch=replace(DEFN.torch, extra_packages=("numpy==2.4.5", "pillow==13.0.0")))
    with pytest.raises(InputError) as info:
        locks.load(ROOT / "images", changed, X86, debian=False)
    assert "changed since this lock was written" in str(info.value)
    assert "`invoke lock --image pytorch --arch x86_64`" in str(info.value)
    moved = replace(DEFN, base=replace(DEFN.base, mirror="http://example.org/debian"))
    with pytest.raises(InputError, match="changed since this lock was written"):
        locks.load(ROOT / "images", moved, X86, debian=True)


def test_an_arch_the_definition_does_not_declare_and_a_missing_lock(tmp_path):
    cu128 = DEFS["pytorch-cu128"]
    with pytest.raises(InputError, match="declares x86_64, not aarch64"):
        locks.load(ROOT / "images", cu128, ARM, debian=False)
    images = _copy(tmp_path)
    (images / "locks" / "pytorch-x86_64.txt").unlink()
    with pytest.raises(InputError, match=r"no lock for pytorch on x86_64; run `invoke lock --image pytorch"):
        locks.load(images, DEFN, X86, debian=False)
    shutil.copy(images / "locks" / "pytorch-cu128-x86_64.txt", images / "locks" / "pytorch-cu128-aarch64.txt")
    (images / "locks" / "notes.txt").write_text("x")
    found = locks.stray(images, DEFS)
    assert any("pytorch-cu128-aarch64.txt: pytorch-cu128.yaml declares x86_64, not aarch64" in f for f in found)
    assert any("notes.txt: no definition or arch" in f for f in found)


@pytest.mark.parametrize("old, new, needle", [
    ("adduser=3.134  # base", "adduser=3.134  # root", "line 6"),
    ("adduser=3.134", "adduser=3.134;id", "line 6"),
    ("adduser=3.134", "Adduser=3.134", "line 6"),
])
def test_a_hand_edited_debian_lock_is_one_line(tmp_path, old, new, needle):
    images = _copy(tmp_path)
    _edit(images, old, new, "pytorch-x86_64.deb.txt")
    with pytest.raises(InputError) as info:
        locks.load(images, DEFN, X86, debian=True)
    assert needle in str(info.value) and "expected NAME=VERSION  # base|apt" in str(info.value)


@settings(max_examples=200, deadline=10_000)
@given(st.text(max_size=400))
def test_any_lock_text_parses_or_is_one_line(text):
    try:
        lock = locks.parse(Path("x.txt"), text, debian=False)
    except InputError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("x.txt")
    else:
        assert all(locks.WHEEL_LINE.fullmatch(w.line) for w in lock.entries)


def test_a_pip_report_becomes_lock_lines_and_a_missing_hash_is_refused():
    # shape of pip's --report (pip docs, "Installation Report", version 1)
    url = "https://files.pythonhosted.org/packages/ab/cd/numpy-2.4.6-cp311-cp311-manylinux_2_28_x86_64.whl"
    report = {"version": "1", "install": [
        {"metadata": {"name": "NumPy", "version": "2.4.6"},
         "download_info": {"url": url, "archive_info": {"hashes": {"sha256": "a" * 64}}}},
        {"metadata": {"name": "python_etcd", "version": "0.4.5"},
         "download_info": {"url": "file:///tmp/built/python_etcd-0.4.5-py3-none-any.whl", "archive_info": {}}},
    ]}
    sdist = locks.Wheel("python-etcd", "0.4.5", "b" * 64, "python-etcd-0.4.5.tar.gz")
    found = locks.from_report(report, {"python-etcd": sdist}, "https://pypi.org/simple")
    assert found[0] == locks.Wheel("numpy", "2.4.6", "a" * 64, url.rsplit("/", 1)[1]) and found[1] is sdist
    del report["install"][0]["download_info"]["archive_info"]["hashes"]
    with pytest.raises(InputError, match="gave no sha256 for numpy==2.4.6"):
        locks.from_report(report, {"python-etcd": sdist}, "https://pypi.org/simple")
    report["install"][0]["download_info"] = {"url": "https://x/numpy-1.whl%0A--index-url", "archive_info": {
        "hashes": {"sha256": "a" * 64}}}
    with pytest.raises(InputError, match="is not a lockable file"):
        locks.from_report(report, {"python-etcd": sdist}, "https://pypi.org/simple")


def test_upstream_check_names_a_file_gone_or_a_hash_changed():
    lock = locks.load(ROOT / "images", DEFN, X86, debian=False)
    listed = {w.file: w.sha256 for w in lock.entries}

    def fetch_json(url):
        project = url.rstrip("/").rsplit("/", 1)[1]
        files = [{"filename": f, "hashes": {"sha256": h}} for f, h in listed.items()
                 if locks.canonical(f.split("-")[0]) == project or f.startswith(project)]
        return "application/vnd.pypi.simple.v1+json", json.dumps({"files": files}).encode()

    assert locks.upstream_problems(lock, ["https://pypi.org/simple"], fetch_json) == []
    numpy = next(w for w in lock.entries if w.name == "numpy")
    listed[numpy.file] = "c" * 64
    problems = locks.upstream_problems(lock, ["https://pypi.org/simple"], fetch_json)
    assert problems == [f"{lock.path}: numpy==2.4.6: the hash of {numpy.file} changed upstream (lock "
                        f"{numpy.sha256[:12]}, index cccccccccccc); do not relock blindly: find out why the file "
                        "changed"]
    del listed[numpy.file]
    problems = locks.upstream_problems(lock, ["https://pypi.org/simple"], fetch_json)
    assert len(problems) == 1 and "is no longer on https://pypi.org/simple" in problems[0]
    # a PEP 503 HTML page works the same way
    html = f'<a href="../../packages/x/{numpy.file}#sha256={numpy.sha256}">f</a>'.encode()
    assert locks.index_files("https://i/simple", "numpy", lambda url: ("text/html", html)) == {numpy.file: numpy.sha256}


def test_dpkg_and_apt_simulation_output_become_entries_and_a_base_is_compared():
    # apt-get install -s prints "Inst NAME (VERSION RELEASE [ARCH])" (apt-pkg/algorithms.cc, Simulate)
    simulated = ("NOTE: This is only a simulation!\nInst libfabric1 (1.17.0-3 Debian:12.12/stable [amd64])\n"
                 "Inst libfabric-bin [1.16.0-1] (1.17.0-3 Debian:12.12/stable [amd64])\nConf libfabric1 (1.17.0-3)\n")
    assert [d.pin for d in locks.parse_simulation(simulated)] == ["libfabric1=1.17.0-3", "libfabric-bin=1.17.0-3"]
    installed = locks.parse_dpkg("libc6=2.36-9+deb12u13\nbash=5.2.15-2+b9\n", "base")
    lock = locks.Lock(Path("l.deb.txt"), "pytorch", "x86_64", "x", (
        locks.Deb("libc6", "2.36-9+deb12u10", "base"), locks.Deb("zlib1g", "1:1.2.13", "base"),
        locks.Deb("libfabric1", "1.17.0-3", "apt")))
    assert locks.base_differences(lock, installed) == [
        "libc6 is 2.36-9+deb12u13, the lock has 2.36-9+deb12u10", "zlib1g=1:1.2.13 is missing",
        "bash=5.2.15-2+b9 is not in the lock"]
    with pytest.raises(InputError, match="dpkg-query printed 'libc6 2.36'"):
        locks.parse_dpkg("libc6 2.36\n", "base")


def test_the_driver_floor_follows_the_locked_cuda_runtime():
    lock = locks.Lock(Path("l.txt"), "p", "x86_64", "x", (locks.Wheel("nvidia-cuda-runtime-cu12", "12.8.90", "a" * 64,
                                                                       "f.whl"),))
    assert locks.driver_floor(lock) == "525.60.13"
    assert locks.driver_floor(replace(lock, entries=(locks.Wheel("nvidia-cuda-runtime", "13.0.96", "a" * 64, "f"),))) \
        == "580"
    assert locks.driver_floor(replace(lock, entries=())) == ""


@pytest.mark.parametrize("kind", ["fifo", "binary", "huge", "directory"])
def test_a_lock_that_is_not_a_small_text_file_is_one_line(tmp_path, kind):
    # the lock is read through definition_yaml.read_text: regular file, 1 MiB, UTF-8, never a hang
    import os

    images = _copy(tmp_path)
    path = images / "locks" / "pytorch-x86_64.txt"
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "binary":
        path.write_bytes(b"# image: pytorch\n\xff\xfe\x00binary")
    elif kind == "huge":
        path.write_text("# x\n" * (locks.MAX_LOCK_BYTES // 4 + 1))
    else:
        path.mkdir()
    with pytest.raises(InputError) as info:
        locks.load(images, DEFN, X86, debian=False)
    assert str(info.value).startswith(str(path)) and "\n" not in str(info.value)
    assert ("UTF-8" if kind == "binary" else "a lock file `invoke lock` wrote") in str(info.value)
