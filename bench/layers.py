"""Image layers as gzip against zstd, side by side in one run: push, pull into an empty store, bytes.

    python bench/layers.py [--image REF] [--repeats 3] [--registry-dir /dev/shm] [--store-dir /var/tmp]

A throwaway registry (Debian's docker-registry, distribution v2) on a free port of
127.0.0.1, its storage in a new folder under ``--registry-dir``, receives the image twice:

- gzip: ``docker push`` of a 127.0.0.1:PORT tag, the engine compressing each layer as it
  sends it (Docker 20.10 writes gzip layers only);
- zstd: ``skopeo copy --dest-compress-format zstd --format oci`` from the gzip tag into a
  repository of its own, each layer decompressed and compressed again as zstd (OCI media
  type ``application/vnd.oci.image.layer.v1.tar+zstd``). Copied into the same repository,
  containers/image finds each gzip blob already there and reuses it: nothing is recompressed.

Then ``--repeats`` pulls of each format, the order alternating (gzip first on odd repeats,
zstd first on even ones): ``podman pull`` into an empty store (a new ``--root``,
``--runroot``, ``--tmpdir`` and TMPDIR, where podman keeps the compressed blobs until it
has unpacked them, under ``--store-dir``), timed from start to exit: download,
decompression and unpack. The store is removed after each pull. The registry's storage
defaults to /dev/shm: its blobs are read from memory, as a remote registry's would come off
a network, and the disk holds only the one store being written.

Bytes: each format's compressed layers (the sum of the layer sizes its manifest lists, read
from the registry's API), the unpacked image (podman's Size) and what a launcher-only release
moves: the layers of the step that copies the launcher (docker/Dockerfile, runtime-base:
``cp -R /srv "$site/torchpod"``), named by the image's history, in each format.

Last, ``docker pull`` of the zstd tag, whose error line is kept: the engine here is one
runtime users run the image with. The choice (``choose``): zstd when its median pull is
faster by more than either format's runs spread and every runtime users run reads it;
otherwise gzip stays the default, zstd named as a variant when it is faster but a runtime
cannot read it or was not checked. The runtimes this host does not run (enroot, Apptainer,
later Docker Engines, containerd) are listed by version range as their sources were read
(READ_IN_SOURCE), a range that cannot read zstd counting as one that cannot. Prints a table
and writes bench/results/layers.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "entrypoints"))
sys.path.insert(0, str(ROOT / "toolkit"))

from torchpod import readers  # noqa: E402
from torchpod.errors import RuntimeFailure, TorchpodError  # noqa: E402
from torchpod_toolkit import grammars  # noqa: E402
from torchpod_toolkit.imagebuild.definitions import DEFAULT_IMAGE, load_definitions  # noqa: E402

FORMATS = ("gzip", "zstd")
REPOSITORY = {"gzip": "torchpod-layers-gzip", "zstd": "torchpod-layers-zstd"}  # one each: see the docstring
MEDIA_TYPES = {  # a layer's media type -> its compression (Docker's schema 2 and OCI's)
    "application/vnd.docker.image.rootfs.diff.tar.gzip": "gzip",
    "application/vnd.oci.image.layer.v1.tar+gzip": "gzip",
    "application/vnd.oci.image.layer.v1.tar+zstd": "zstd",
}
ACCEPT = "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json"
MANIFEST_CAP = 1 << 20  # a manifest of a few dozen layers is a few kB
# the history entries that carry a layer (BuildKit), bottom first, as bench/rebuild.py counts them
LAYER_STEPS = ("RUN", "COPY", "ADD", "WORKDIR")
# docker/Dockerfile, runtime-base: the RUN that copies entrypoints/torchpod into site-packages
LAUNCHER_STEP = re.compile(r'cp -R /srv "\$site/torchpod"')
MARGIN_BYTES = 2 * 10**9  # free space kept beyond a step's own estimate
# Runtimes users run the image with; each is measured here or read in its source, by version.
USER_RUNTIMES = ("Docker Engine", "enroot", "Apptainer")
WAIT_S = 1800  # one push or pull of a 5 GB image on a shared two-core host


def checked(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Every option checked before anything starts (parser.error: one line, exit 2)."""
    if not 0 < args.repeats <= 20:
        parser.error(f"--repeats={args.repeats}: expected 1 to 20")
    if len(args.image) > grammars.REFERENCE_MAX or not grammars.is_reference(args.image) or "@" in args.image:
        parser.error(f"--image={args.image!r}: expected an image reference by tag (name:tag) that the engine holds")
    for flag in ("registry_dir", "store_dir"):
        value = getattr(args, flag)
        option = "--" + flag.replace("_", "-")
        if not value.isprintable() or not os.path.isabs(value) or not os.path.isdir(value):
            parser.error(f"{option}={value!r}: expected an existing folder, by absolute path")
    if args.storage_driver not in ("overlay", "vfs"):
        parser.error(f"--storage-driver={args.storage_driver!r}: expected overlay or vfs")


def run(argv: list[str], what: str, env: dict[str, str] | None = None, check: bool = True) -> tuple[int, str, str]:
    """One command, its exit status and output; a failure (with ``check``) is one RuntimeFailure."""
    proc = subprocess.run(argv, capture_output=True, text=True, errors="replace", env=env, timeout=WAIT_S)
    if check and proc.returncode != 0:
        raise RuntimeFailure(f"{what} failed (exit {proc.returncode}): {last_line(proc.stderr or proc.stdout)}")
    return proc.returncode, proc.stdout, proc.stderr


def timed(argv: list[str], what: str, env: dict[str, str] | None = None) -> float:
    t0 = time.monotonic()
    run(argv, what, env)
    return round(time.monotonic() - t0, 2)


def last_line(text: str) -> str:
    """The last non-empty line of a command's output, printable and at most 200 characters."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    line = lines[-1] if lines else "(no output)"
    return "".join(c if c.isprintable() else "?" for c in line)[:200]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def registry(folder: Path) -> Iterator[str]:
    """docker-registry serving ``folder``/data on a free port of 127.0.0.1; its address."""
    port = free_port()
    config = folder / "config.yml"
    config.write_text(json.dumps({  # YAML is a superset of JSON
        "version": 0.1, "log": {"level": "warn"},
        "storage": {"filesystem": {"rootdirectory": str(folder / "data")}, "delete": {"enabled": True}},
        "http": {"addr": f"127.0.0.1:{port}"}}))
    address = f"127.0.0.1:{port}"
    with (folder / "registry.log").open("wb") as log:
        proc = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(100):
            with contextlib.suppress(OSError):
                urllib.request.urlopen(f"http://{address}/v2/", timeout=1).close()
                break
            if proc.poll() is not None:
                raise RuntimeFailure(f"docker-registry exited ({proc.returncode}); its log: {folder}/registry.log")
            time.sleep(0.1)
        else:
            raise RuntimeFailure(f"docker-registry never answered on {address} in 10 s")
        yield address
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def parse_manifest(text: str) -> list[tuple[str, int]]:
    """(media type, compressed size) of each layer an image manifest lists, bottom first; a
    manifest of another form (an index, schema 1, a broken document) is one ValueError."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        raise ValueError("the manifest is not JSON; expected an image manifest (schema 2 or OCI)") from None
    layers = doc.get("layers") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or doc.get("schemaVersion") != 2 or not isinstance(layers, list) or not layers:
        raise ValueError("the manifest lists no layers; expected an image manifest (schema 2 or OCI) of one platform")
    out = []
    for i, layer in enumerate(layers):
        kind = layer.get("mediaType") if isinstance(layer, dict) else None
        size = layer.get("size") if isinstance(layer, dict) else None
        if not isinstance(kind, str) or isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"layer {i} of the manifest: {str(layer)[:80]!r}; "
                             "expected a mediaType and a size in bytes")
        out.append((kind, size))
    return out


def compression(layers: list[tuple[str, int]]) -> str:
    """The one compression every layer has (gzip or zstd); a mixed or unknown one is a ValueError."""
    found = {MEDIA_TYPES.get(kind, kind[:80]) for kind, _ in layers}
    if len(found) != 1 or not found <= set(FORMATS):
        raise ValueError(f"the layers are {sorted(found)}; expected all gzip or all zstd")
    return found.pop()


def manifest(address: str, repository: str, tag: str) -> list[tuple[str, int]]:
    req = urllib.request.Request(f"http://{address}/v2/{repository}/manifests/{tag}", headers={"Accept": ACCEPT})
    with urllib.request.urlopen(req, timeout=30) as resp:
        body = resp.read(MANIFEST_CAP + 1)
    if len(body) > MANIFEST_CAP:
        raise RuntimeFailure(f"{repository}:{tag}: the manifest is over {MANIFEST_CAP} bytes; expected a few kB")
    return parse_manifest(body.decode("utf-8", errors="replace"))


def launcher_layers(history: str, layer_count: int) -> list[int]:
    """The indexes (bottom first) of the layers the launcher's step made, from ``docker history
    --no-trunc --format '{{json .}}'`` (newest first, one JSON object a line): the entries of
    a layer-making step are matched to the image's layers in order."""
    steps = []
    for number, line in enumerate(history.splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):
            raise ValueError(f"docker history line {number} is not JSON; expected one object a line") from None
        created = entry.get("CreatedBy") if isinstance(entry, dict) else None
        if not isinstance(created, str):
            raise ValueError(f"docker history line {number} has no CreatedBy; expected docker's history entries")
        steps.append(created)
    layer_steps = [s for s in reversed(steps) if s.split(" ", 1)[0] in LAYER_STEPS]
    if len(layer_steps) != layer_count:
        raise ValueError(f"docker history names {len(layer_steps)} layer steps for {layer_count} layers; "
                         "expected one step a layer")
    found = [i for i, step in enumerate(layer_steps) if LAUNCHER_STEP.search(step)]
    if not found:
        raise ValueError("no layer of the image was made by the step that copies the launcher; "
                         "expected docker/Dockerfile's runtime-base step")
    return found


def alternated(repeat: int) -> tuple[str, ...]:
    """The formats in the order the ``repeat``-th round (from 0) pulls them."""
    return FORMATS if repeat % 2 == 0 else FORMATS[::-1]


def medians(runs: list[dict[str, Any]]) -> dict[str, float]:
    """Each format's median pull time over ``runs`` (a format with no run is absent)."""
    out = {}
    for fmt in FORMATS:
        times = [r["pull_s"] for r in runs if r.get("format") == fmt]
        if times:
            out[fmt] = round(statistics.median(times), 2)
    return out


def ratio(zstd: float, gzip: float) -> float:
    return round(zstd / gzip, 3) if gzip > 0 else float("nan")


def spreads(runs: list[dict[str, Any]]) -> dict[str, float]:
    """Each format's spread: its slowest pull less its fastest."""
    out = {}
    for fmt in FORMATS:
        times = [r["pull_s"] for r in runs if r.get("format") == fmt]
        if times:
            out[fmt] = round(max(times) - min(times), 2)
    return out


def choose(median_s: dict[str, float], spread_s: dict[str, float], runtimes: list[dict[str, Any]]) -> dict[str, Any]:
    """The default format: zstd when its median pull into an empty store is faster by more
    than either format's runs spread and every runtime users run (USER_RUNTIMES) reads it.
    Faster but not read by one of them (or not checked): gzip stays the default and zstd is
    named as a variant. Not faster by more than the spread: gzip, which every runtime reads."""
    gzip, zstd = median_s["gzip"], median_s["zstd"]
    unread = [r["runtime"] for r in runtimes
              if str(r.get("runtime", "")).startswith(USER_RUNTIMES) and r.get("reads_zstd") is not True]
    noise = max(spread_s.values(), default=0.0)
    figures = (f"median pull and unpack into an empty store: gzip {gzip:.1f} s, zstd {zstd:.1f} s "
               f"(the runs of one format spread over up to {noise:.1f} s)")
    if gzip - zstd <= noise:
        return {"default": "gzip", "variant": None, "faster": None if abs(gzip - zstd) <= noise else "gzip",
                "why": f"{figures}; zstd is not faster by more than that, and gzip is what every runtime reads"}
    if unread:
        return {"default": "gzip", "variant": "zstd", "faster": "zstd",
                "why": f"{figures}; zstd is faster, but {', '.join(unread)} cannot read zstd layers or was not "
                       "checked here, so gzip stays the default and zstd is at most an extra tag for runtimes "
                       "that read it"}
    return {"default": "zstd", "variant": "gzip", "faster": "zstd",
            "why": f"{figures}; zstd is faster and every runtime listed reads it"}


def table(report: dict[str, Any]) -> list[str]:
    """The printed table: each format's push, median pull and bytes, and zstd over gzip."""
    formats, med, ratios = report["formats"], report["median_pull_s"], report["ratio_zstd_gzip"]
    rows: list[tuple[str, ...]] = [("format", "push s", "pull+unpack s (median)", "compressed GB", "launcher layer MB")]
    for fmt in FORMATS:
        f = formats[fmt]
        rows.append((fmt, f"{f['push_s']:.1f}", f"{med[fmt]:.1f}", f"{f['compressed_bytes'] / 1e9:.2f}",
                     f"{f['launcher_bytes'] / 1e6:.3f}"))
    rows.append(("zstd/gzip", *(f"{ratios[k]:.3f}" for k in ("push_s", "pull_s", "compressed_bytes",
                                                               "launcher_bytes"))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows]


def _unescape(field: str) -> str:
    """A mountinfo path field: the kernel writes space, tab, newline and backslash as octal."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mounts(mountinfo: str) -> list[tuple[str, str]]:
    """(mount point, filesystem type) of each line of /proc/self/mountinfo; a line of another
    form is skipped."""
    out = []
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(" "), right.split(" ")
        if sep and len(fields) >= 6 and tail[0]:
            out.append((_unescape(fields[4]), tail[0]))
    return out


def under(path: str, folder: str) -> bool:
    folder = folder.rstrip("/") or "/"
    return path == folder or path.startswith(folder if folder == "/" else folder + "/")


def filesystem(mountinfo: str, path: str) -> str:
    """The type of the filesystem ``path`` is on: its longest mount point."""
    found = [(len(point), kind) for point, kind in mounts(mountinfo) if under(path, point)]
    return max(found)[1] if found else "unknown"


def read_mountinfo() -> str:
    return readers.read_text("/proc/self/mountinfo", what="/proc/self/mountinfo", expected="the kernel's mount table",
                             cap=readers.TABLE_CAP)


def unmount_under(folder: str) -> None:
    """Lazily unmount anything a pull left mounted under ``folder``, deepest first."""
    for point in sorted((p for p, _ in mounts(read_mountinfo()) if under(p, folder)), key=len, reverse=True):
        run(["umount", "-l", point], f"umount {point}", check=False)


def available_memory() -> int:
    text = readers.read_text("/proc/meminfo", what="/proc/meminfo", expected="the kernel's memory table",
                             cap=readers.TABLE_CAP)
    found = re.search(r"^MemAvailable:\s+([0-9]{1,15}) kB$", text, re.M)
    return int(found.group(1)) * 1024 if found else 0


def need_space(folder: str, needed: int, what: str) -> None:
    """Refuse (one line) to start a step whose estimate and the margin do not fit ``folder``,
    or the memory a memory-backed folder takes from."""
    free = shutil.disk_usage(folder).free
    if filesystem(read_mountinfo(), os.path.realpath(folder)) == "tmpfs":
        free = min(free, available_memory())
    if free < needed + MARGIN_BYTES:
        raise RuntimeFailure(f"{folder}: {free / 1e9:.1f} GB free; expected {(needed + MARGIN_BYTES) / 1e9:.1f} GB "
                             f"for {what} (its estimate and a {MARGIN_BYTES / 1e9:.0f} GB margin)")


def outermost_missing(path: Path) -> Path | None:
    """The outermost of ``path`` and its parents that does not exist: what creating ``path``
    creates. None when ``path`` exists."""
    missing = None
    for folder in (path, *path.parents):
        if folder.exists():
            break
        missing = folder
    return missing


def leftovers() -> list[Path]:
    """What skopeo and podman write outside the folders this run names, where it is not there
    yet: skopeo's blob-location cache (containers/image, pkg/blobinfocache/default.go:
    /var/lib/containers/cache as root) and podman's lock segment (containers/common,
    libpod/define/config.go: DefaultSHMLockPath, /dev/shm/libpod_lock). This run creates them and removes them."""
    cache = Path("/var/lib/containers/cache") if os.geteuid() == 0 else \
        Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "containers" / "cache"
    found = [outermost_missing(cache)]
    if os.geteuid() == 0:
        found.append(outermost_missing(Path("/dev/shm/libpod_lock")))
    return [p for p in found if p is not None]


def remove(paths: list[Path]) -> None:
    for path in paths:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def image_facts(image: str) -> tuple[int, int, list[int]]:
    """The image's unpacked size as the engine counts it, its layer count and its launcher
    layers' indexes."""
    rc, out, err = run(["docker", "image", "inspect", "--format", "{{.Size}} {{len .RootFS.Layers}}", image],
                       "docker image inspect", check=False)
    if rc != 0:
        raise RuntimeFailure(f"--image={image!r}: {last_line(err)}; expected an image the engine holds")
    size, count = (int(n) for n in out.split())
    _, history, _ = run(["docker", "history", "--no-trunc", "--format", "{{json .}}", image], "docker history")
    return size, count, launcher_layers(history, count)


def ref(address: str, fmt: str) -> str:
    return f"{address}/{REPOSITORY[fmt]}:{fmt}"


def push_both(image: str, address: str, layer_count: int) -> dict[str, dict[str, Any]]:
    """The image pushed as gzip (the engine) and copied as zstd (skopeo); each timed, and its
    manifest's layers read back and checked to be all of that compression."""
    run(["docker", "tag", image, ref(address, "gzip")], "docker tag")
    try:
        push_s = {"gzip": timed(["docker", "push", ref(address, "gzip")], "docker push")}
    finally:
        run(["docker", "rmi", ref(address, "gzip")], "docker rmi (the tag only)", check=False)
    print(f"  gzip: docker push {push_s['gzip']:.1f} s", flush=True)
    push_s["zstd"] = timed(["skopeo", "copy", "--quiet", "--src-tls-verify=false", "--dest-tls-verify=false",
                            "--dest-compress-format", "zstd", "--format", "oci", f"docker://{ref(address, 'gzip')}",
                            f"docker://{ref(address, 'zstd')}"], "skopeo copy (zstd)")
    print(f"  zstd: skopeo copy {push_s['zstd']:.1f} s", flush=True)
    out = {}
    for fmt in FORMATS:
        layers = manifest(address, REPOSITORY[fmt], fmt)
        if compression(layers) != fmt or len(layers) != layer_count:
            raise RuntimeFailure(f"{ref(address, fmt)}: {len(layers)} layers of {compression(layers)}; expected "
                                 f"{layer_count} of {fmt}")
        out[fmt] = {"push_s": push_s[fmt], "compressed_bytes": sum(size for _, size in layers),
                    "layer_bytes": [size for _, size in layers], "media_type": layers[-1][0]}
    return out


def pull_once(args: argparse.Namespace, address: str, fmt: str) -> tuple[float, int]:
    """One ``podman pull`` of ``fmt`` into a new, empty store under --store-dir, timed; the
    unpacked size podman counts. The store is removed, and the disk synced, before it returns."""
    tmp = tempfile.mkdtemp(dir=args.store_dir, prefix="torchpod-layers-store-")
    try:
        parts = {name: Path(tmp) / name for name in ("root", "runroot", "tmpdir", "spool")}
        for folder in parts.values():
            folder.mkdir()
        podman = ["podman", "--root", str(parts["root"]), "--runroot", str(parts["runroot"]),
                  "--tmpdir", str(parts["tmpdir"]), "--storage-driver", args.storage_driver,
                  "--events-backend", "none", "--cgroup-manager", "cgroupfs"]
        env = {**os.environ, "TMPDIR": str(parts["spool"])}  # where podman keeps the blobs it unpacks
        seconds = timed([*podman, "pull", "--quiet", "--tls-verify=false", ref(address, fmt)],
                        f"podman pull ({fmt})", env)
        _, size, _ = run([*podman, "image", "inspect", "--format", "{{.Size}}", ref(address, fmt)],
                         "podman image inspect", env)
        return seconds, int(size.strip())
    finally:
        unmount_under(tmp)
        shutil.rmtree(tmp, ignore_errors=True)
        if os.path.exists(tmp):
            print(f"layers.py: could not remove {tmp}; remove it by hand", file=sys.stderr)
        run(["sync"], "sync", check=False)  # the next pull starts with no writeback of this one


def pulls(args: argparse.Namespace, address: str, formats: dict[str, dict[str, Any]],
          image_bytes: int, layer_count: int) -> list[dict[str, Any]]:
    """``--repeats`` rounds, each pulling both formats into empty stores, the order alternating."""
    unpack = image_bytes * (layer_count if args.storage_driver == "vfs" else 1)  # vfs copies each layer's parent
    runs = []
    for repeat in range(args.repeats):
        for place, fmt in enumerate(alternated(repeat), 1):
            need_space(args.store_dir, unpack + formats[fmt]["compressed_bytes"], f"one {fmt} pull")
            seconds, unpacked = pull_once(args, address, fmt)
            runs.append({"repeat": repeat + 1, "place": place, "format": fmt, "pull_s": seconds,
                         "unpacked_bytes": unpacked})
            print(f"  #{repeat + 1} {fmt}: podman pull {seconds:.1f} s", flush=True)
    return runs


def docker_reads_zstd(address: str, version: str) -> dict[str, Any]:
    """``docker pull`` of the zstd tag: whether this engine reads it, and its error line if not."""
    rc, _, err = run(["docker", "pull", ref(address, "zstd")], "docker pull (zstd)", check=False)
    if rc == 0:
        run(["docker", "rmi", ref(address, "zstd")], "docker rmi", check=False)
        return {"runtime": f"Docker Engine {version}", "reads_zstd": True, "checked": "measured here"}
    return {"runtime": f"Docker Engine {version}", "reads_zstd": False, "checked": "measured here",
            "error": last_line(err)}


def versions() -> dict[str, str]:
    found = {}
    for name, argv in {"docker": ["docker", "version", "--format", "{{.Server.Version}}"],
                       "skopeo": ["skopeo", "--version"], "podman": ["podman", "--version"],
                       "docker-registry": ["docker-registry", "--version"]}.items():
        _, out, _ = run(argv, f"{name} --version")
        found[name] = out.split()[-1].split("+")[0] if out.split() else "unknown"
    return found


# Runtimes this host does not run, by version, from their sources (read, not run here); a
# version range that cannot read zstd keeps gzip the default (``choose``).
READ_IN_SOURCE = [
    {"runtime": "Docker Engine 23.0.0 and later", "reads_zstd": True,
     "checked": "source read",
     "source": "moby/moby pkg/archive/archive.go, DecompressStream's zstd case (commit e187eb2bb5, "
               "first released in v23.0.0), which distribution/xfer/download.go calls for every pulled layer"},
    {"runtime": "containerd 1.5.0 and later", "reads_zstd": True,
     "checked": "source read",
     "source": "containerd/containerd images/mediatypes.go at v1.5.0, DiffCompression's zstd case"},
    {"runtime": "enroot 3.5.0 and earlier", "reads_zstd": False,
     "checked": "source read",
     "source": "NVIDIA/enroot src/docker.sh at v3.5.0 passes every layer through "
               "ENROOT_GZIP_PROGRAM (gzip -d)"},
    {"runtime": "enroot 4.0.0 and later", "reads_zstd": True,
     "checked": "source read",
     "source": "NVIDIA/enroot src/docker.sh, commit 4d843dc (in v4.0.0) keeps a "
               "application/vnd.oci.image.layer.v1.tar+zstd layer as it is; up to v4.1.2 the first layer's "
               "media type decides for every layer (fixed in commit d0402e0, in no tag yet), so an image "
               "whose layers mix gzip and zstd fails there"},
    {"runtime": "Apptainer 1.3 and earlier", "reads_zstd": False,
     "checked": "source read",
     "source": "apptainer/apptainer unpacks with opencontainers/umoci v0.4.7, whose layer check "
               "(isLayerType) takes only tar and tar+gzip; umoci reads zstd from v0.5.0"},
    {"runtime": "Apptainer 1.4.0 and later", "reads_zstd": True,
     "checked": "source read",
     "source": "apptainer/apptainer internal/pkg/build/sources/oci_unpack.go decompresses each "
               "layer with go-containerregistry (v0.20.2 from commit 53f7050c6; partial/compressed.go's "
               "zstd case since v0.13.0) before umoci unpacks it"},
]


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """The whole run: registry up, both pushes, the alternating pulls, Docker's pull of zstd;
    everything it made removed, on failure and ^C too."""
    t0, load_before = time.monotonic(), os.getloadavg()
    found = versions()
    image_bytes, layer_count, launcher = image_facts(args.image)
    need_space(args.registry_dir, image_bytes * 13 // 10, "the registry's two copies of the image")
    made = leftovers()
    try:
        with tempfile.TemporaryDirectory(dir=args.registry_dir, prefix="torchpod-layers-registry-") as tmp, \
                registry(Path(tmp)) as address:
            formats = push_both(args.image, address, layer_count)
            runs = pulls(args, address, formats, image_bytes, layer_count)
            docker = docker_reads_zstd(address, found["docker"])
    finally:
        remove(made)
    for f in formats.values():
        f["launcher_bytes"] = sum(f["layer_bytes"][i] for i in launcher)
    med, spread = medians(runs), spreads(runs)
    runtimes = [{"runtime": f"podman {found['podman']}", "reads_zstd": True,
                 "checked": "measured here: every zstd pull above"}, docker, *READ_IN_SOURCE]
    return {
        "date": time.strftime("%Y-%m-%d", time.gmtime()), "image": args.image, "repeats": args.repeats,
        "host": {"cpus": os.cpu_count(), "machine": platform.machine(), **found},
        "load_average": {"before": [round(x, 2) for x in load_before],
                         "after": [round(x, 2) for x in os.getloadavg()]},
        "seconds": round(time.monotonic() - t0, 1),
        "registry": {"dir": args.registry_dir, "filesystem": filesystem(read_mountinfo(), args.registry_dir)},
        "store": {"dir": args.store_dir, "filesystem": filesystem(read_mountinfo(), args.store_dir),
                  "storage_driver": args.storage_driver},
        "layers": layer_count, "launcher_layers": launcher,
        "unpacked_bytes": runs[0]["unpacked_bytes"], "engine_image_bytes": image_bytes,
        "formats": formats, "runs": runs, "median_pull_s": med, "spread_pull_s": spread,
        "ratio_zstd_gzip": {"push_s": ratio(formats["zstd"]["push_s"], formats["gzip"]["push_s"]),
                            "pull_s": ratio(med["zstd"], med["gzip"]),
                            "compressed_bytes": ratio(formats["zstd"]["compressed_bytes"],
                                                      formats["gzip"]["compressed_bytes"]),
                            "launcher_bytes": ratio(formats["zstd"]["launcher_bytes"],
                                                    formats["gzip"]["launcher_bytes"])},
        "runtimes": runtimes, "choice": choose(med, spread, runtimes),
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="layers.py", description=__doc__.splitlines()[0])
    defn = load_definitions(ROOT / "images")[DEFAULT_IMAGE]
    parser.add_argument("--image", default=defn.ref(defn.arch("x86_64")), help="an image the engine holds")
    parser.add_argument("--repeats", type=int, default=3, help="pulls of each format (1 to 20)")
    parser.add_argument("--registry-dir", default="/dev/shm",
                        help="where the registry's storage goes (a new folder, removed at the end)")
    parser.add_argument("--store-dir", default="/var/tmp",
                        help="where each empty podman store goes (a new folder, removed after each pull)")
    parser.add_argument("--storage-driver", default="overlay", help="podman's: overlay or vfs")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "layers.json"))
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    checked(parser, args)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop and remove what it started, as on ^C
    try:
        report = measure(args)
    except (TorchpodError, ValueError, OSError, subprocess.TimeoutExpired) as exc:
        print(f"layers.py: {' '.join(str(exc).split())[:400]}", file=sys.stderr)
        return 1
    print("\n".join(table(report)))
    print(f"choice: {report['choice']['default']} by default; {report['choice']['why']}")
    Path(args.out).write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
