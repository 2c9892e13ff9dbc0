"""Image benchmarks: size vs payload, aarch64-on-x86_64 vs native build, warm rebuild.

    python bench/images.py [--image pytorch] [--rounds 1]

Prints a table and writes bench/results/images.json. Full rebuilds run side by side in
one run (arches alternated), each forced through the TORCHPOD_REBUILD build arg, with
cached base images and the wheelhouse filled (torchpod_toolkit.imagebuild.wheelhouse: nothing is
downloaded), so the ratio compares like with like on the same host. BuildKit's layer cache
is pruned before each timed build: each build adds ~10 GB of it. bench/rebuild.py compares
full and launcher-only rebuilds with an earlier commit's build code.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "entrypoints"))
sys.path.insert(0, str(ROOT / "toolkit"))

from torchpod_toolkit.imagebuild import definitions, host, pipeline, proc  # noqa: E402


def payload_bytes(client, ref: str, defn, arch) -> int:
    site = f"/opt/venv/lib/python{defn.python}/site-packages"
    out = client.containers.run(ref, ["-c", f"du -sb {site} | cut -f1"], entrypoint="sh",
                                platform=arch.docker, remove=True, network_disabled=True)
    return int(out.decode().strip())


def prune_layer_cache() -> None:
    """Drop BuildKit's layer records (cache mounts, if any, kept)."""
    docker = host.find_builder().docker
    proc.run([docker, "builder", "prune", "-af", "--filter", "type=regular"], quiet=True,
               what="docker builder prune")


def cold_builds(defn, bundle, rounds: int) -> dict[str, list[float]]:
    """Full rebuilds, arches alternated, the wheelhouse kept, layer cache pruned first."""
    for arch in defn.arches:  # warm-up: the wheelhouse and base images
        pipeline.build(defn, arch, root=ROOT, ca_bundle=bundle, quiet=True)
    builds: dict[str, list[float]] = {a.name: [] for a in defn.arches}
    for _ in range(rounds):
        for arch in defn.arches:
            prune_layer_cache()
            result = pipeline.build(defn, arch, root=ROOT, ca_bundle=bundle, rebuild=uuid.uuid4().hex,
                                  quiet=True)
            builds[arch.name].append(result.seconds)
    prune_layer_cache()
    return builds


def warm_rebuilds(defn, bundle) -> dict[str, float]:
    """A rebuild after a change under entrypoints/ only (the cache rebuilt first); the images
    are left matching the tree."""
    for arch in defn.arches:
        pipeline.build(defn, arch, root=ROOT, ca_bundle=bundle, quiet=True)
    marker = ROOT / "entrypoints" / "torchpod" / f"_bench_{uuid.uuid4().hex[:8]}.py"
    warm: dict[str, float] = {}
    try:
        marker.write_text("# written by bench/images.py to force a launcher-only rebuild\n")
        for arch in defn.arches:
            warm[arch.name] = pipeline.build(defn, arch, root=ROOT, ca_bundle=bundle, quiet=True).seconds
    finally:
        marker.unlink()
    for arch in defn.arches:
        pipeline.build(defn, arch, root=ROOT, ca_bundle=bundle, quiet=True)
    return warm


def rows_for(client, defn, builds: dict[str, list[float]], warm: dict[str, float]) -> dict[str, dict]:
    native = host.host_arch().name
    rows: dict[str, dict] = {}
    for arch in defn.arches:
        ref = defn.ref(arch)
        size = client.images.get(ref).attrs["Size"]
        payload = payload_bytes(client, ref, defn, arch)
        best = min(builds[arch.name])
        rows[arch.name] = {
            "image_bytes": size,
            "payload_bytes": payload,
            "size_ratio": round(size / payload, 4),
            "cold_build_s": round(best, 1),
            "build_ratio_vs_native": round(best / min(builds[native]), 2) if native in builds else None,
            "warm_rebuild_s": round(warm[arch.name], 1),
        }
    return rows


def print_table(rows: dict[str, dict]) -> None:
    header = f"{'arch':8} {'image GB':>9} {'torch env GB':>13} {'size ratio':>10} {'cold build s':>12} " \
             f"{'vs native':>9} {'warm rebuild s':>14}"
    print(header)
    print("-" * len(header))
    for name, r in rows.items():
        print(f"{name:8} {r['image_bytes'] / 1e9:9.2f} {r['payload_bytes'] / 1e9:13.2f} {r['size_ratio']:10.3f} "
              f"{r['cold_build_s']:12.1f} {r['build_ratio_vs_native'] or 0:9.2f} {r['warm_rebuild_s']:14.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default="pytorch")
    parser.add_argument("--rounds", type=int, default=1, help="full rebuilds (no layer cache) per arch")
    args = parser.parse_args()
    defn = definitions.select(definitions.load_definitions(ROOT / "images"), args.image)
    bundle = host.default_ca_bundle()
    builds = cold_builds(defn, bundle, args.rounds)
    warm = warm_rebuilds(defn, bundle)
    rows = rows_for(host.docker_client(), defn, builds, warm)
    print_table(rows)
    out = ROOT / "bench" / "results" / "images.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "image": defn.name, "host": platform.machine(), "rounds": args.rounds,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "arches": rows,
    }, indent=2) + "\n")
    print(f"\nwrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
