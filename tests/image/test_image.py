"""Inside each built image (testinfra): the image holds what its definition and labels say.

Parametrized over every (ci image, arch) by conftest.py. Foreign-arch containers run
under QEMU user emulation, with the sysfs stand-in that lets torch import there
(torchpod_toolkit.imagebuild.host.emulation_volumes).
"""

from __future__ import annotations

import json

import pytest

import torchpod
from torchpod_toolkit.imagebuild import wheelhouse

import layer_scan
from needs import missing

pytestmark = [pytest.mark.docker, pytest.mark.image]

COMPILERS = ("gcc", "cc", "g++", "c++", "clang", "cpp", "make", "ld", "as", "nvcc")


# What these tests ask of the image's torch (the probe, torch's versions, the image's own
# torchrun judging the launcher's Slurm plan) comes from the ``facts`` fixture: rank 0 of the
# image tier's one training run per image and arch (tests/image_runs.py), which has imported
# torch already; under QEMU each `import torch` costs about a minute.


def e_machine(built, path: str) -> int:
    return int(built.run(f"od -An -j18 -N2 -tu2 {path}").strip())


def test_labels_carry_versions_read_from_the_image(built, facts):
    found = facts["probe"]
    assert found["torch_imported"] == "yes"
    labels = built.labels
    for key in ("title", "version", "created", "revision", "base.name"):
        assert labels.get(f"org.opencontainers.image.{key}"), key
    assert labels["io.torchpod.arch"] == built.arch.name == found["machine"]
    for key in ("torch", "torchvision", "cuda", "nccl", "rdma-core", "python"):
        assert labels[f"io.torchpod.{key}"] == found[key], key
    assert found["torch"].startswith(built.defn.torch.version)
    assert found["torchvision"].startswith(built.defn.torch.torchvision)
    assert found["cuda"] == built.defn.expect.cuda and found["nccl"] == built.defn.expect.nccl


def test_native_libraries_match_the_architecture(built, facts):
    found = facts["probe"]
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


def test_torch_imports_and_agrees_with_the_labels(built, facts):
    version, cuda, nccl = facts["torch"]
    assert version == built.labels["io.torchpod.torch"]
    assert cuda == built.labels["io.torchpod.cuda"]
    assert ".".join(map(str, nccl)) == built.labels["io.torchpod.nccl"]


def test_the_wheel_built_from_a_locked_sdist_names_the_pinned_backend(built):
    # python-etcd is locked by its sdist; the wheelhouse builds its wheel with the pinned
    # setuptools, so the image's bytes do not follow the newest setuptools on the index
    text = built.run("cat /opt/venv/lib/python*/site-packages/python_etcd-*.dist-info/WHEEL")
    assert f"Generator: {wheelhouse.BACKEND_GENERATOR}" in text.splitlines()


# The model a Run:ai example trains (torchvision.models.resnet18) and a compiled torchvision
# op: both fail when torchvision's native library does not load against this torch.
TORCHVISION = """
import json, torch, torchvision
model = torchvision.models.resnet18(num_classes=10).eval()
with torch.no_grad():
    out = model(torch.randn(1, 3, 64, 64))
boxes = torch.tensor([[0.0, 0.0, 10.0, 10.0], [1.0, 1.0, 11.0, 11.0], [50.0, 50.0, 60.0, 60.0]])
keep = torchvision.ops.nms(boxes, torch.tensor([0.9, 0.8, 0.7]), iou_threshold=0.5)
print(json.dumps({"shape": list(out.shape), "keep": keep.tolist(), "version": torchvision.__version__}))
"""


def test_torchvision_builds_resnet18_and_runs_a_compiled_op(built_native):
    # natively; an emulated arch runs torchvision's model in test_least_privilege.py (as a
    # non-root user on a read-only root), and a minute of QEMU each is not spent twice
    built = built_native
    found = json.loads(_exec(built, ["python", "-c", TORCHVISION]).splitlines()[-1])
    assert found["shape"] == [1, 10]
    assert found["keep"] == [0, 2]  # the second box overlaps the first (IoU 0.68 > 0.5)
    assert found["version"] == built.labels["io.torchpod.torchvision"]


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
    assert not built.host.file(f"/usr/include/python{built.defn.python}").exists
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
    if not needles:  # without one, there is nothing of the host's to look for
        missing("a CA certificate this host added under /usr/local/share/ca-certificates")
    # every layer, each read once for good (tests/layer_scan.py: a diff ID is its bytes)
    from torchpod_toolkit.imagebuild.host import user_cache

    scanned = layer_scan.Scanned(user_cache() / "layer-scans", needles)
    dirty, read = layer_scan.dirty_layers(built.image, docker_client.info(), scanned)
    print(f"{built.defn.name} {built.arch.name}: {read} of {len(built.image.attrs['RootFS']['Layers'])} layers read")
    assert not dirty, f"a host-only CA certificate is inside layer(s) {dirty}"


def _exec(built, argv: list[str], **kwargs) -> str:
    code, out = built.container.exec_run(argv, **kwargs)
    text = out.decode(errors="replace")
    assert code == 0, text
    return text


def test_plan_is_accepted_by_the_images_own_torchrun(facts):
    found = facts
    plan = found["plan"]
    assert (plan["scheduler"], found["nnodes"], found["rdzv_endpoint"]) == ("slurm", "2", "n1:29400")
    assert plan["version"] == torchpod.__version__
    # the launcher read the image's torch right: the flag is used exactly when it exists
    assert (plan["signals_to_handle"] is not None) == found["has_signals_flag"]
    assert any(a.startswith("--signals-to-handle=") for a in plan["torchrun_args"]) == found["has_signals_flag"]


def test_unreadable_script_is_one_line_before_anything_starts(built):
    # as a user who cannot read it (root reads anything); the check runs before torchrun
    _exec(built, ["sh", "-c", "printf 'print(1)\\n' > /tmp/secret.py && chmod 600 /tmp/secret.py"])
    code, out = built.container.exec_run(["torchpod", "run", "/tmp/secret.py"], user="65534",
                                         environment={"CUDA_VISIBLE_DEVICES": ""})
    lines = [ln for ln in out.decode(errors="replace").splitlines() if ln.strip()]
    assert code == 2, lines
    assert lines[-1].startswith("torchpod: error: script '/tmp/secret.py' is not readable on node 0"), lines
    assert "user id 65534" in lines[-1] and not any("torch.distributed" in ln for ln in lines)


# A RoCE port as sysfs shows it (linux drivers/infiniband/core/sysfs.c), for the doctor to read.
ROCE_TREE = """
import os
port = "/tmp/sys/class/infiniband/mlx5_0/ports/1"
for sub in ("gids", "gid_attrs/types", "gid_attrs/ndevs"):
    os.makedirs(f"{port}/{sub}", exist_ok=True)
open(f"{port}/state", "w").write("4: ACTIVE\\n")
open(f"{port}/link_layer", "w").write("Ethernet\\n")
open(f"{port}/gids/3", "w").write("0000:0000:0000:0000:0000:ffff:0a00:0001\\n")
open(f"{port}/gid_attrs/types/3", "w").write("RoCE v2\\n")
"""


def test_doctor_loads_the_images_verbs_providers(built):
    _exec(built, ["python", "-c", ROCE_TREE])
    code, out = built.container.exec_run(["torchpod", "doctor", "--sysfs-root", "/tmp/sys", "--format", "json"],
                                         environment={"CUDA_VISIBLE_DEVICES": ""})
    data = json.loads(out.decode())
    checks = {c["name"]: c for c in data["checks"]}
    assert checks["verbs"]["status"] == "ok", checks["verbs"]  # libibverbs and mlx5 dlopen in the image
    assert checks["uverbs"]["status"] == "fail"  # no RDMA device node in a test container
    assert code == 1


def test_run_forms_a_two_process_group(built_native):
    # `torchpod run` end to end in the image as shipped: torchrun, c10d, two gloo ranks; as
    # root natively (an emulated arch forms its two-process group in test_least_privilege.py,
    # as a non-root user on a read-only root)
    built = built_native
    out = _exec(built, ["torchpod", "run", "--nproc-per-node=2",
                        "/opt/torchpod/examples/allreduce_check.py", "--expect-world", "2"],
                environment={"CUDA_VISIBLE_DEVICES": ""})
    results = [json.loads(ln.split("TORCHPOD_RESULT ", 1)[1]) for ln in out.splitlines()
               if "TORCHPOD_RESULT " in ln]
    assert sorted(r["rank"] for r in results) == [0, 1], out
    assert all(r["ok"] and r["world_size"] == 2 for r in results), out
