"""The lock's resolution and the wheelhouse against a real index: pip and a PEP 503 index
served from here (http.server, static pages with '#sha256=' fragments, as PyPI's simple pages
carry), small wheels made here. Happy path: `invoke lock`'s resolution writes every file with
its hash, the wheelhouse fetches each once and then nothing. Unusual and hostile: an index
that gives no hash, a locked hash the index's file does not have."""

from __future__ import annotations

import hashlib
import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest
from small_wheels import make_wheel

from torchpod.arch import normalise_arch
from torchpod.errors import RuntimeFailure
from torchpod_toolkit.imagebuild import locks, resolver, wheelhouse
from torchpod_toolkit.imagebuild.definitions import load_definitions

X86 = normalise_arch("x86_64")
FILES = {"torch": ("2.13.0", "cp311-cp311-manylinux_2_28_x86_64"),
         "torchvision": ("0.28.0", "cp311-cp311-manylinux_2_28_x86_64"),
         "pip": ("26.0", "py3-none-any")}


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def index(tmp_path):
    """A PEP 503 index at http://127.0.0.1:PORT/simple/ of FILES; ``hashes=False`` drops the fragments."""
    files = tmp_path / "site" / "files"
    files.mkdir(parents=True)
    for name, (version, tag) in FILES.items():
        make_wheel(files, name, version, tag)

    def pages(hashes: bool) -> None:
        for wheel in files.iterdir():
            project = wheel.name.split("-")[0]
            folder = tmp_path / "site" / "simple" / project
            folder.mkdir(parents=True, exist_ok=True)
            fragment = f"#sha256={hashlib.sha256(wheel.read_bytes()).hexdigest()}" if hashes else ""
            (folder / "index.html").write_text(f'<html><body><a href="../../files/{wheel.name}{fragment}">'
                                               f"{wheel.name}</a></body></html>\n")

    pages(True)
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(tmp_path / "site")))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/simple"
    images = tmp_path / "images"
    images.mkdir()
    (images / "img.yaml").write_text(
        'arches: [x86_64]\nbase: {debian: bookworm}\npython: "3.11"\n'
        f'torch: {{version: "2.13.0", torchvision: "0.28.0", index_url: "{url}"}}\n'
        'expect: {cuda: "13.0", nccl: "2.29.7"}\nrdma_core: {packages: [libibverbs1], providers: [mlx5]}\n')
    yield load_definitions(images)["img"], files, pages, tmp_path
    server.shutdown()


def test_the_resolution_locks_every_file_and_the_wheelhouse_fetches_each_once(index):
    defn, files, _, tmp = index
    wheels = resolver.lock_wheels(defn, X86, tmp / "cache", None)
    assert {w.name: w.version for w in wheels} == {name: v for name, (v, _) in FILES.items()}
    for w in wheels:
        assert w.sha256 == hashlib.sha256((files / w.file).read_bytes()).hexdigest()
    path = locks.wheel_path(tmp / "images", defn, X86)
    path.parent.mkdir()
    path.write_text(locks.render(defn, X86, wheels, debian=False))
    lock = locks.load(tmp / "images", defn, X86, debian=False)  # what was written reads back
    home = tmp / "wheelhouse"
    assert wheelhouse.fill(defn, X86, lock, home=home, ca_bundle=None, offline=False) == 3
    assert all(wheelhouse.stored(home, w).read_bytes() == (files / w.file).read_bytes() for w in lock.entries)
    assert wheelhouse.fill(defn, X86, lock, home=home, ca_bundle=None, offline=False) == 0


def test_an_index_without_hashes_is_locked_by_the_files_pip_downloaded(index):
    # pip hashes what it downloads when the link carries no hash (its report's archive_info), so
    # the lock still names each file's sha256; a lock line never lacks one (unit: from_report)
    defn, files, pages, tmp = index
    pages(False)
    wheels = resolver.lock_wheels(defn, X86, tmp / "cache", None)
    assert {w.file: w.sha256 for w in wheels} == {
        f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in files.iterdir()}


def test_a_file_whose_hash_differs_from_the_lock_is_never_stored(index):
    defn, files, _, tmp = index
    wheels = resolver.lock_wheels(defn, X86, tmp / "cache", None)
    forged = [locks.Wheel(w.name, w.version, "0" * 64, w.file) if w.name == "torch" else w for w in wheels]
    lock = locks.Lock(tmp / "l.txt", defn.name, "x86_64", "x", tuple(forged))
    home = tmp / "wheelhouse"
    with pytest.raises(RuntimeFailure, match="pip download of 3 locked wheels for x86_64 failed"):
        wheelhouse.fill(defn, X86, lock, home=home, ca_bundle=None, offline=False)
    assert not wheelhouse.stored(home, forged[[w.name for w in forged].index("torch")]).exists()


def test_the_index_fetcher_reads_a_page_and_a_missing_project_lists_nothing(index):
    defn, files, _, tmp = index
    fetch = resolver.index_fetcher(None)
    torch = next(files.glob("torch-*.whl"))
    listed = locks.index_files(defn.torch.index_url, "torch", fetch)
    assert listed == {torch.name: hashlib.sha256(torch.read_bytes()).hexdigest()}
    assert locks.index_files(defn.torch.index_url, "no-such-project", fetch) == {}


def test_a_wheel_built_from_an_sdist_is_the_same_bytes_every_time(tmp_path):
    # the payload key hashes it: a wheelhouse that rebuilds it (after a trim) must not move the key
    src = tmp_path / "tiny-1.0"
    (src / "tiny").mkdir(parents=True)
    (src / "tiny" / "__init__.py").write_text("VALUE = 1\n")
    (src / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools"]\nbuild-backend = '
                                        '"setuptools.build_meta"\n\n[project]\nname = "tiny"\nversion = "1.0"\n')
    # the pinned backend, hash-checked from PyPI as a build installs it, whatever the host's
    # setuptools (pyenv's Python 3.11.7 has 65.5, which cannot build a wheel without `wheel`)
    backend = wheelhouse.backend(sys.executable, tmp_path / "home", ["--index-url", "https://pypi.org/simple"], {})
    built = []
    for n in range(2):
        out = tmp_path / f"out{n}"
        (src / "tiny" / "__init__.py").touch()  # a later build finds newer files
        wheel = wheelhouse.build_wheel(sys.executable, src, out, [], {}, backend=backend)
        assert list(out.glob("*.whl")) == [wheel] and wheelhouse.generator(wheel) == wheelhouse.BACKEND_GENERATOR
        built.append(hashlib.sha256(wheel.read_bytes()).hexdigest())
    assert built[0] == built[1]
