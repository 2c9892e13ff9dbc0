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
runtime users run the image with. The choice (``_layer_figures.choose``): zstd when its
median pull is faster by more than either format's runs spread and every runtime users run
reads it; otherwise gzip stays the default, zstd named as a variant when it is faster but a
runtime cannot read it or was not checked. The runtimes this host does not run (enroot,
Apptainer, later Docker Engines, containerd) are listed by version range as their sources
were read (``_layer_figures.READ_IN_SOURCE``), a range that cannot read zstd counting as one
that cannot. Prints a table and writes bench/results/layers.json.

This program runs the steps (the registry, the pushes, the pulls, docker); its helper
bench/_layer_figures.py holds what they read and compute (the manifest, the history, the
mount table, the medians, spreads and ratios, the choice and the table).
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

import _layer_figures as figures  # noqa: E402  (bench/ is sys.path[0]: this script's folder)

from torchpod import readers  # noqa: E402
from torchpod.errors import RuntimeFailure, TorchpodError  # noqa: E402
from torchpod_toolkit import grammars  # noqa: E402
from torchpod_toolkit.imagebuild.definitions import DEFAULT_IMAGE, load_definitions  # noqa: E402

REPOSITORY = {"gzip": "torchpod-layers-gzip", "zstd": "torchpod-layers-zstd"}  # one each: see the docstring
ACCEPT = "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json"
MANIFEST_CAP = 1 << 20  # a manifest of a few dozen layers is a few kB
MARGIN_BYTES = 2 * 10**9  # free space kept beyond a step's own estimate
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
        raise RuntimeFailure(f"{what} failed (exit {proc.returncode}): {figures.last_line(proc.stderr or proc.stdout)}")
    return proc.returncode, proc.stdout, proc.stderr


def timed(argv: list[str], what: str, env: dict[str, str] | None = None) -> float:
    t0 = time.monotonic()
    run(argv, what, env)
    return round(time.monotonic() - t0, 2)


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


def manifest(address: str, repository: str, tag: str) -> list[tuple[str, int]]:
    req = urllib.request.Request(f"http://{address}/v2/{repository}/manifests/{tag}", headers={"Accept": ACCEPT})
    with urllib.request.urlopen(req, timeout=30) as resp:
        body = resp.read(MANIFEST_CAP + 1)
    if len(body) > MANIFEST_CAP:
        raise RuntimeFailure(f"{repository}:{tag}: the manifest is over {MANIFEST_CAP} bytes; expected a few kB")
    return figures.parse_manifest(body.decode("utf-8", errors="replace"))


def read_mountinfo() -> str:
    return readers.read_text("/proc/self/mountinfo", what="/proc/self/mountinfo", expected="the kernel's mount table",
                             cap=readers.TABLE_CAP)


def unmount_under(folder: str) -> None:
    """Lazily unmount anything a pull left mounted under ``folder``, deepest first."""
    points = [p for p, _ in figures.mounts(read_mountinfo()) if figures.under(p, folder)]
    for point in sorted(points, key=len, reverse=True):
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
    if figures.filesystem(read_mountinfo(), os.path.realpath(folder)) == "tmpfs":
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
        raise RuntimeFailure(f"--image={image!r}: {figures.last_line(err)}; expected an image the engine holds")
    size, count = (int(n) for n in out.split())
    _, history, _ = run(["docker", "history", "--no-trunc", "--format", "{{json .}}", image], "docker history")
    return size, count, figures.launcher_layers(history, count)


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
    for fmt in figures.FORMATS:
        layers = manifest(address, REPOSITORY[fmt], fmt)
        found = figures.compression(layers)
        if found != fmt or len(layers) != layer_count:
            raise RuntimeFailure(f"{ref(address, fmt)}: {len(layers)} layers of {found}; expected "
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
        for place, fmt in enumerate(figures.alternated(repeat), 1):
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
            "error": figures.last_line(err)}


def versions() -> dict[str, str]:
    found = {}
    for name, argv in {"docker": ["docker", "version", "--format", "{{.Server.Version}}"],
                       "skopeo": ["skopeo", "--version"], "podman": ["podman", "--version"],
                       "docker-registry": ["docker-registry", "--version"]}.items():
        _, out, _ = run(argv, f"{name} --version")
        found[name] = out.split()[-1].split("+")[0] if out.split() else "unknown"
    return found


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
    med, spread = figures.medians(runs), figures.spreads(runs)
    runtimes = [{"runtime": f"podman {found['podman']}", "reads_zstd": True,
                 "checked": "measured here: every zstd pull above"}, docker, *figures.READ_IN_SOURCE]
    return {
        "date": time.strftime("%Y-%m-%d", time.gmtime()), "image": args.image, "repeats": args.repeats,
        "host": {"cpus": os.cpu_count(), "machine": platform.machine(), **found},
        "load_average": {"before": [round(x, 2) for x in load_before],
                         "after": [round(x, 2) for x in os.getloadavg()]},
        "seconds": round(time.monotonic() - t0, 1),
        "registry": {"dir": args.registry_dir, "filesystem": figures.filesystem(read_mountinfo(), args.registry_dir)},
        "store": {"dir": args.store_dir, "filesystem": figures.filesystem(read_mountinfo(), args.store_dir),
                  "storage_driver": args.storage_driver},
        "layers": layer_count, "launcher_layers": launcher,
        "unpacked_bytes": runs[0]["unpacked_bytes"], "engine_image_bytes": image_bytes,
        "formats": formats, "runs": runs, "median_pull_s": med, "spread_pull_s": spread,
        "ratio_zstd_gzip": {"push_s": figures.ratio(formats["zstd"]["push_s"], formats["gzip"]["push_s"]),
                            "pull_s": figures.ratio(med["zstd"], med["gzip"]),
                            "compressed_bytes": figures.ratio(formats["zstd"]["compressed_bytes"],
                                                      formats["gzip"]["compressed_bytes"]),
                            "launcher_bytes": figures.ratio(formats["zstd"]["launcher_bytes"],
                                                    formats["gzip"]["launcher_bytes"])},
        "runtimes": runtimes, "choice": figures.choose(med, spread, runtimes),
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
    print("\n".join(figures.table(report)))
    print(f"choice: {report['choice']['default']} by default; {report['choice']['why']}")
    Path(args.out).write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
