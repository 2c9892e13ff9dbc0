"""Inside each built image (testinfra): the image holds what its definition and labels say.

Parametrized over every (ci image, arch) by conftest.py. Foreign-arch containers run
under QEMU user emulation, with the sysfs stand-in that lets torch import there
(torchpod.build.engine.emulation_volumes).
"""

from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.image]

COMPILERS = ("gcc", "cc", "g++", "c++", "clang", "cpp", "make", "ld", "as", "nvcc")


def probe(built) -> dict:
    return json.loads(built.run("python -m torchpod.build.probe --import-torch").splitlines()[-1])


def e_machine(built, path: str) -> int:
    return int(built.run(f"od -An -j18 -N2 -tu2 {path}").strip())


def test_labels_carry_versions_read_from_the_image(built):
    found = probe(built)
    assert found["torch_imported"] == "yes"
    labels = built.labels
    for key in ("title", "version", "created", "revision", "base.name"):
        assert labels.get(f"org.opencontainers.image.{key}"), key
    assert labels["io.torchpod.arch"] == built.arch.name == found["machine"]
    for key in ("torch", "cuda", "nccl", "rdma-core", "python"):
        assert labels[f"io.torchpod.{key}"] == found[key], key
    assert found["torch"].startswith(built.defn.torch.version)
    assert found["cuda"] == built.defn.expect.cuda and found["nccl"] == built.defn.expect.nccl


def test_native_libraries_match_the_architecture(built):
    found = probe(built)
    paths = [
        "/usr/bin/python3",
        found["libnccl"],
        "/opt/venv/lib/python*/site-packages/torch/lib/libtorch_cpu.so",
        "/usr/lib/*-linux-gnu/libibverbs.so.1",
    ]
    for pattern in paths:
        path = built.run(f"ls {pattern} | head -n1").strip()
        assert path, pattern
        assert e_machine(built, path) == built.arch.elf_code, f"{path} is not {built.arch.elf_machine}"


def test_torch_imports_and_agrees_with_the_labels(built):
    out = built.run("python -c 'import json, torch; print(json.dumps([torch.__version__, "
                    "torch.version.cuda, list(torch.cuda.nccl.version())]))'")
    version, cuda, nccl = json.loads(out)
    assert version == built.labels["io.torchpod.torch"]
    assert cuda == built.labels["io.torchpod.cuda"]
    assert ".".join(map(str, nccl)) == built.labels["io.torchpod.nccl"]


def test_torch_libraries_resolve(built):
    # Every shared library torch's extension needs is found in the image: what a failed
    # `import torch` on a real GH200 node would otherwise reveal. libcuda.so.1 comes from
    # the host driver at run time (the NVIDIA container toolkit mounts it).
    out = built.run("ldd /opt/venv/lib/python*/site-packages/torch/lib/libtorch_cuda.so "
                    "/opt/venv/lib/python*/site-packages/torch/_C*.so")
    missing = [ln.strip() for ln in out.splitlines() if "not found" in ln and "libcuda.so" not in ln]
    assert not missing, missing


@pytest.mark.parametrize("library", ["libibverbs.so.1", "librdmacm.so.1"])
def test_rdma_core_libraries_load(built, library):
    built.run(f"python -c 'import ctypes; ctypes.CDLL(\"{library}\")'")


def test_verbs_providers_present_and_loadable(built):
    for provider in built.defn.rdma_core.providers:
        plugin = built.run(f"ls /usr/lib/*-linux-gnu/libibverbs/lib{provider}-rdmav*.so | head -n1").strip()
        assert plugin, f"no {provider} verbs provider"
        built.run(f"python -c 'import ctypes; ctypes.CDLL(\"libibverbs.so.1\", ctypes.RTLD_GLOBAL); "
                  f"ctypes.CDLL(\"{plugin}\")'")
        assert built.host.file(f"/etc/libibverbs.d/{provider}.driver").exists


def test_ibv_tools_run(built):
    # A test container has no uverbs device: libibverbs then reports ENOSYS and lists
    # none. The tools still load and run; what must never appear is a loader failure.
    for tool in ("ibv_devices", "ibv_devinfo"):
        result = built.host.run(tool)
        output = result.stdout + result.stderr
        assert result.rc in (0, 1, 255), output  # ibv_devinfo exits 255 with no device
        assert "error while loading shared libraries" not in output
        assert "device" in output.lower(), output


def test_launcher_is_the_entrypoint_and_on_path(built):
    assert built.image.attrs["Config"]["Entrypoint"] == ["torchpod"]
    assert built.run("command -v torchpod").strip() == "/opt/venv/bin/torchpod"
    assert built.run("torchpod --version").startswith("torchpod ")
    assert built.run("command -v torchrun").strip() == "/opt/venv/bin/torchrun"


def test_no_compiler_headers_or_caches(built):
    for tool in COMPILERS:
        assert not built.host.exists(tool), f"{tool} is in the final image"
    assert not built.host.file("/usr/include/python3.11").exists
    assert built.run("ls /usr/lib/gcc/*/*/cc1 2>/dev/null | wc -l").strip() == "0"
    assert not built.host.file("/root/.cache/pip").exists
    lists = built.run("find /var/lib/apt/lists -type f ! -name lock").split()
    assert lists == []


def test_no_build_secret_in_any_layer(built, docker_client, host_only_certs):
    # The CA bundle reached pip as a BuildKit secret; no layer (deleted files included) may
    # hold it. `docker save` streams every layer uncompressed, so a byte search is exact.
    assert built.run("ls -A /run/secrets 2>/dev/null | wc -l").strip() == "0"
    history = json.dumps(built.image.history())
    assert "ca-certificates.crt" not in history and "BEGIN CERTIFICATE" not in history
    needles = [n.encode() for n in host_only_certs]
    if not needles:
        pytest.skip("this host added no CA of its own under /usr/local/share/ca-certificates")
    overlap = max(len(n) for n in needles)
    tail = b""
    for chunk in built.image.save(chunk_size=8 << 20):
        window = tail + chunk
        for needle in needles:
            assert needle not in window, "a host-only CA certificate is inside an image layer"
        tail = window[-overlap:]
