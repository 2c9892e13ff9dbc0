"""What a built image holds, read back from it: the probe (``python -m torchpod.probe`` run
inside, emulated for a foreign arch) and its result remembered in the user's cache, and the
net plugin's identity read from its ELF file.

An image is labelled and tagged only from what this module read, never from the YAML.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

from torchpod import netplugin, readers
from torchpod.contract import IMAGE_PLUGIN, Arch
from torchpod.errors import InputError, RuntimeFailure

from . import host, plugin
from .inputs import Inputs


def probe_image(client, ref: str, arch: Arch, cache: Path, *, timeout: int = 300) -> dict[str, str]:
    """Run the probe in ``ref`` (it imports torch, emulated or not) and return what it read."""
    container = client.containers.run(ref, ["-m", "torchpod.probe", "--import-torch"],
                                      entrypoint="python", platform=arch.docker, detach=True,
                                      network_disabled=True,
                                      volumes=host.emulation_volumes(arch, host.host_arch(), cache))
    import requests

    try:
        try:
            status = container.wait(timeout=timeout)["StatusCode"]
        # a hung emulated process (some urllib3 versions say ConnectionError: Read timed out)
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
            raise RuntimeFailure(f"probe of {ref} did not finish in {timeout} s") from None
        output = container.logs().decode(errors="replace").strip()
        if status != 0:
            raise RuntimeFailure(f"probe of {ref} failed (exit {status}): {output.splitlines()[-1:]}")
        return json.loads(output.splitlines()[-1])
    finally:
        container.remove(force=True)


# the probe and the one module it imports (torchpod.contract)
PROBE_SOURCES = tuple(Path(__file__).resolve().parents[3] / "entrypoints" / "torchpod" / name
                      for name in ("probe.py", "contract.py"))


def probe_key(inputs: Inputs, base_id: str, arch: Arch) -> str:
    """What decides everything the probe reads: the locked wheel lines (torch, torchvision,
    CUDA, NCCL), every locked Debian package (Python, rdma-core, and a variant's libfabric,
    which the probe reads too), the base image, the arch and the probe. A launcher-only edit
    changes none of them, so its rebuild does not import torch again (under QEMU, most of an
    aarch64 rebuild); and the key holds no path of the checkout, so a fresh clone finds it."""
    wheels = "".join(w.line + "\n" for w in inputs.wheels.entries)
    debs = "".join(f"{d.layer}:{d.name}={d.version}\n" for d in inputs.debs.entries) if inputs.debs else ""
    parts = [arch.name, hashlib.sha256(wheels.encode()).hexdigest(), hashlib.sha256(debs.encode()).hexdigest(),
             base_id, *(hashlib.sha256(_source(path)).hexdigest() for path in PROBE_SOURCES)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _source(path: Path) -> bytes:
    return readers.read_bytes(path, what=str(path), expected="torchpod's own source", cap=readers.DATA_CAP)


def cached_probe(client, ref: str, arch: Arch, cache: Path, key: str) -> dict[str, str]:
    """The probe's result for ``key`` (``<cache>/probes/<key>.json``: the user's cache, so a fresh
    clone finds what an earlier one probed), probing ``ref`` when unknown."""
    path = cache / "probes" / f"{key}.json"
    try:  # a result this function wrote on an earlier run; anything else is probed again
        found = json.loads(readers.read_text(path, what=str(path), expected="a probe's result", cap=readers.DATA_CAP))
        if isinstance(found, dict) and all(isinstance(v, str) for v in found.values()):
            return found
    except (InputError, ValueError):
        pass
    found = probe_image(client, ref, arch, cache)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(found))
    os.replace(tmp, path)
    return found


def netplugin_facts(client, ref: str, nccl: str) -> dict[str, str]:
    """What the plugin in the built image says it is, read from the file (any arch)."""
    container = client.containers.create(ref, entrypoint=["true"])
    try:
        stream, _ = container.get_archive(str(Path(IMAGE_PLUGIN).parent))
        tar = tarfile.open(fileobj=io.BytesIO(b"".join(stream)))
    finally:
        container.remove(force=True)
    members = {Path(m.name).name: m for m in tar.getmembers()}
    member = members.get(Path(IMAGE_PLUGIN).name)
    while member is not None and member.issym():
        member = members.get(Path(member.linkname).name)
    if member is None or not member.isfile():
        raise RuntimeFailure(f"{ref}: the net plugin stage left no {IMAGE_PLUGIN}")
    info = plugin.read(tar.extractfile(member).read())  # type: ignore[union-attr]  # a regular file: isfile() above
    want = netplugin.wanted(tuple(int(x) for x in nccl.split(".")) if nccl else None)
    api = sorted(set(info.exported) & set(want), reverse=True)
    return {"nccl-net-plugin": f"{info.label}, ncclNetPlugin_v{api[0] if api else '?'}",
            "nccl-net-plugin-version": info.version or "", "nccl-net-plugin-machine": info.machine,
            "nccl-net-plugin-api": f"v{api[0]}" if api else ""}
