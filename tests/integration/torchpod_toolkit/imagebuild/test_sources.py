"""Pinned source tarballs: verified before Docker runs, from a real HTTP server or a local file.

The server is Python's own http.server on loopback, serving bytes made in the test (the
real aws-ofi-nccl release cannot be downloaded here: GitHub is unreachable). What is
under test is torchpod's fetch, cache and checksum logic, which is the same for any bytes.
"""

from __future__ import annotations

import hashlib
import http.server
import os
import re
import threading
from pathlib import Path

import pytest

from torchpod.errors import InputError, RuntimeFailure
from torchpod_toolkit.imagebuild import host, pipeline
from torchpod_toolkit.imagebuild.definitions import load_definitions
from torchpod_toolkit.imagebuild.sources import aws_ofi_nccl_source, pack_release, sha256_of

PAYLOAD = b"aws-ofi-nccl-1.14.0/configure\n" * 1000
GOOD_SHA = hashlib.sha256(PAYLOAD).hexdigest()
BASE = """\
arches: [x86_64]
base: {debian: bookworm}
python: "3.11"
torch: {version: "2.13.0", torchvision: "0.28.0", index_url: https://pypi.org/simple}
expect: {cuda: "13.0", nccl: "2.29.7"}
rdma_core: {packages: [libibverbs1], providers: [mlx5]}
"""


class Server:
    """A loopback HTTP server that serves PAYLOAD at /good.tar.gz and counts requests."""

    def __init__(self):
        served = self.requests = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                served.append(self.path)
                if self.path != "/good.tar.gz":
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(PAYLOAD)))
                self.end_headers()
                self.wfile.write(PAYLOAD)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def server():
    s = Server()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


def definition(tmp_path: Path, ofi: str):
    images = tmp_path / "images"
    images.mkdir(exist_ok=True)
    (images / "img.yaml").write_text(BASE + "aws_ofi_nccl: " + ofi + "\n")
    return load_definitions(images)["img"]


def test_download_is_verified_cached_and_reused(tmp_path, server):
    defn = definition(tmp_path, f"{{version: '1.14.0', sha256: {GOOD_SHA}, url: '{server.url}/good.tar.gz'}}")
    cache = tmp_path / ".cache"
    path = aws_ofi_nccl_source(defn, cache)
    assert path == cache / "sources" / "aws-ofi-nccl-1.14.0.tar.gz"
    assert path.read_bytes() == PAYLOAD
    assert aws_ofi_nccl_source(defn, cache) == path
    assert server.requests == ["/good.tar.gz"]  # the second call used the verified cache


def test_a_corrupted_cache_is_fetched_again(tmp_path, server):
    defn = definition(tmp_path, f"{{version: '1.14.0', sha256: {GOOD_SHA}, url: '{server.url}/good.tar.gz'}}")
    cache = tmp_path / ".cache"
    path = aws_ofi_nccl_source(defn, cache)
    path.write_bytes(b"truncated")
    assert aws_ofi_nccl_source(defn, cache).read_bytes() == PAYLOAD
    assert len(server.requests) == 2


def test_download_with_wrong_checksum_is_refused_and_nothing_kept(tmp_path, server):
    wrong = "0" * 64
    defn = definition(tmp_path, f"{{version: '1.14.0', sha256: '{wrong}', url: '{server.url}/good.tar.gz'}}")
    cache = tmp_path / ".cache"
    with pytest.raises(InputError) as err:
        aws_ofi_nccl_source(defn, cache)
    message = str(err.value)
    assert "checksum mismatch" in message and GOOD_SHA in message and wrong in message
    assert "aws_ofi_nccl.sha256" in message and "\n" not in message
    assert list((cache / "sources").iterdir()) == []


def test_unreachable_source_names_the_address_and_the_offline_fix(tmp_path, server):
    defn = definition(tmp_path, f"{{version: '1.14.0', sha256: {GOOD_SHA}, url: '{server.url}/missing.tar.gz'}}")
    with pytest.raises(RuntimeFailure) as err:
        aws_ofi_nccl_source(defn, tmp_path / ".cache")
    assert f"{server.url}/missing.tar.gz" in str(err.value) and "aws_ofi_nccl.tarball" in str(err.value)


def test_local_tarball_checked_when_pinned(tmp_path):
    (tmp_path / "ofi.tar.gz").write_bytes(PAYLOAD)
    ok = definition(tmp_path, f"{{version: '1.14.0', tarball: ofi.tar.gz, sha256: {GOOD_SHA}}}")
    assert aws_ofi_nccl_source(ok, tmp_path / ".cache") == tmp_path / "ofi.tar.gz"
    # a local tarball has no upstream to pin from later: the definition itself must pin it
    with pytest.raises(InputError, match=r"aws_ofi_nccl.tarball='ofi.tar.gz' has no aws_ofi_nccl.sha256"):
        definition(tmp_path, "{version: '1.14.0', tarball: ofi.tar.gz}")
    bad = definition(tmp_path, f"{{version: '1.14.0', tarball: ofi.tar.gz, sha256: '{'a' * 64}'}}")
    with pytest.raises(InputError, match=f"file has sha256 {GOOD_SHA}"):
        aws_ofi_nccl_source(bad, tmp_path / ".cache")
    missing = definition(tmp_path, f"{{version: '1.14.0', tarball: nowhere.tar.gz, sha256: {GOOD_SHA}}}")
    with pytest.raises(InputError, match="nowhere.tar.gz' does not exist"):
        aws_ofi_nccl_source(missing, tmp_path / ".cache")


def test_build_stops_on_a_bad_source_before_docker_and_stages_a_good_one(tmp_path, monkeypatch, server):
    # A bad source must not reach the engine: docker_client raising proves it was not called.
    def no_docker():
        raise AssertionError("the build reached Docker")

    monkeypatch.setattr(host, "docker_client", no_docker)
    (tmp_path / "ofi.tar.gz").write_bytes(PAYLOAD)
    bad = definition(tmp_path, f"{{version: '1.14.0', tarball: ofi.tar.gz, sha256: '{'a' * 64}'}}")
    with pytest.raises(InputError, match="checksum mismatch"):
        pipeline.build(bad, bad.arches[0], root=tmp_path)
    unpinned = definition(tmp_path, f"{{version: '1.14.0', url: '{server.url}/good.tar.gz'}}")
    with pytest.raises(InputError, match="aws_ofi_nccl.sha256 is missing"):
        pipeline.build(unpinned, unpinned.arches[0], root=tmp_path)
    missing = definition(tmp_path, f"{{version: '1.14.0', tarball: nowhere.tar.gz, sha256: {GOOD_SHA}}}")
    with pytest.raises(InputError, match="does not exist"):
        pipeline.build(missing, missing.arches[0], root=tmp_path)
    assert not (tmp_path / ".cache" / "sources" / "netplugin").exists()  # nothing staged, nothing built
    good = definition(tmp_path, f"{{version: '1.14.0', tarball: ofi.tar.gz, sha256: {GOOD_SHA}}}")
    # a good source is staged; this definition has no lock, the next check before Docker
    with pytest.raises(InputError, match="no lock for"):
        pipeline.build(good, good.arches[0], root=tmp_path)
    staged = tmp_path / ".cache" / "sources" / "netplugin" / f"{good.name}-1.14.0.tar.gz"
    assert staged.read_bytes() == PAYLOAD  # in the build context, for the plugin stage


def test_an_unpinned_upstream_source_is_refused_with_how_to_pin(tmp_path, server):
    defn = definition(tmp_path, f"{{version: '1.14.0', url: '{server.url}/good.tar.gz'}}")
    with pytest.raises(InputError) as err:
        aws_ofi_nccl_source(defn, tmp_path / ".cache")
    assert "aws_ofi_nccl.sha256 is missing" in str(err.value) and "sha256sum" in str(err.value)
    assert server.requests == []  # nothing was downloaded


@pytest.mark.parametrize("make, says", [
    (os.mkfifo, "is a FIFO (named pipe)"),
    (lambda p: os.symlink("/dev/zero", p), "is a character device"),
    (os.mkdir, "is a directory"),
])
def test_a_checksum_is_taken_of_a_regular_file_only_never_waiting(tmp_path, make, says):
    (tmp_path / "f").write_bytes(PAYLOAD)
    assert sha256_of(tmp_path / "f") == GOOD_SHA
    make(tmp_path / "g")
    with pytest.raises(InputError, match=re.escape(f"{tmp_path / 'g'} {says}; expected a regular file")):
        sha256_of(tmp_path / "g")


def test_a_release_is_packed_from_regular_files_and_rewritten_only_when_it_changed(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.c").write_text("int a;\n")
    packed = pack_release(src, ["a.c"], "p", "1.0", tmp_path / "out")
    before = packed.stat().st_mtime_ns
    assert pack_release(src, ["a.c"], "p", "1.0", tmp_path / "out") == packed and packed.stat().st_mtime_ns == before
    os.mkfifo(src / "b.c")
    with pytest.raises(InputError, match="b.c is a FIFO"):
        pack_release(src, ["a.c", "b.c"], "p", "1.0", tmp_path / "out")
    packed.unlink()
    packed.mkdir()  # something not a file where the tarball goes: named, not read
    with pytest.raises(InputError, match="p-1.0.tar.gz is a directory"):
        pack_release(src, ["a.c"], "p", "1.0", tmp_path / "out")
