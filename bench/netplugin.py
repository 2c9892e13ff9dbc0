"""Net plugin variants: image size of each variant against its base image, and the build
time of the plugin stage for aarch64 against x86_64, side by side in one run.

The plugin stage (docker/Dockerfile, `netplugin`) runs on the build host for both arches:
aarch64 is cross-compiled (gcc-aarch64-linux-gnu and arm64 multiarch -dev packages), not
emulated. Each timed build gets a new NETPLUGIN_REBUILD token, so the stage's apt-get,
configure and make all run again (the wheel payload it takes CUDA headers from stays
cached: it is built once, untimed, first); arches alternate. The plugin is the tests' stand-in
(tests/netplugin/, the source CI can reach), built through the same stage as aws-ofi-nccl.

    python bench/netplugin.py --repeats 3

Prints a table and writes bench/results/netplugin.json. Timing lives here, not in tests.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "entrypoints"))
sys.path.insert(0, str(ROOT / "toolkit"))
sys.path.insert(0, str(ROOT))

from torchpod_toolkit.imagebuild import base, commands, definitions, host, sources  # noqa: E402

from tasks import test_plugin_tarball  # noqa: E402


def stage_seconds(defn, arch, builder, client, cache, tarball_rel: str) -> float:
    target = base.ensure_base(client, builder, defn, arch, cache)
    build_base = base.ensure_base(client, builder, defn, host.host_arch(), cache)
    argv = commands.build_command(builder, defn, arch, context=ROOT, tag=f"torchpod-bench/netplugin:{arch.name}",
                                  base_image=target, build_base_image=build_base, wheelhouse=None,
                                  ca_bundle=host.default_ca_bundle(), netplugin_tarball=tarball_rel)
    argv[argv.index("--target") + 1] = "netplugin"
    # a new token for this stage only: its apt-get, configure and make run again, the payload stays cached
    argv[-1:-1] = ["--build-arg", f"NETPLUGIN_REBUILD={uuid.uuid4().hex}"]
    t0 = time.monotonic()
    done = subprocess.run(argv, env=builder.env, capture_output=True, text=True)
    seconds = time.monotonic() - t0
    if done.returncode != 0:
        raise SystemExit(f"plugin stage for {arch.name} failed:\n{done.stderr[-3000:]}")
    return seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "netplugin.json"))
    args = parser.parse_args(argv)
    defs = definitions.load_definitions(ROOT / "images")
    variants = [d for d in defs.values() if d.aws_ofi_nccl is not None and d.ci]
    client = host.docker_client()
    builder = host.find_builder()
    sizes = []
    for v in variants:
        base = defs[v.path.stem.split("-")[0]]
        for arch in v.arches:
            vs, bs = (client.images.get(d.ref(arch)).attrs["Size"] for d in (v, base))
            sizes.append({"variant": v.name, "arch": arch.name, "variant_bytes": vs, "base_bytes": bs,
                          "added_bytes": vs - bs, "ratio": vs / bs})
    tarball, version = test_plugin_tarball()
    first = definitions.with_netplugin_source(variants[0], tarball, version)
    rel = sources.stage_netplugin_source(first, ROOT, None)
    for name in ("x86_64", "aarch64"):  # warm the payload both arches' stages copy headers from
        stage_seconds(first, first.arch(name), builder, client, ROOT / ".cache", rel)
    times: dict[str, list[float]] = {"x86_64": [], "aarch64": []}
    for rep in range(args.repeats):
        order = ["x86_64", "aarch64"] if rep % 2 == 0 else ["aarch64", "x86_64"]
        for name in order:
            s = stage_seconds(first, first.arch(name), builder, client, ROOT / ".cache", rel)
            times[name].append(s)
            print(f"  plugin stage {name:8} {s:6.1f} s", flush=True)
    for name in ("x86_64", "aarch64"):
        client.images.remove(f"torchpod-bench/netplugin:{name}")
    mx, ma = statistics.median(times["x86_64"]), statistics.median(times["aarch64"])
    print("\nvariant            arch     size GB  base GB  added MB  ratio")
    for r in sizes:
        print(f"{r['variant']:18} {r['arch']:8} {r['variant_bytes'] / 1e9:7.2f}  {r['base_bytes'] / 1e9:7.2f}  "
              f"{r['added_bytes'] / 1e6:8.1f}  {r['ratio']:.3f}")
    print(f"\nplugin stage, median of {args.repeats}: x86_64 {mx:.1f} s, aarch64 (cross) {ma:.1f} s, "
          f"ratio {ma / mx:.2f}")
    Path(args.out).write_text(json.dumps({
        "benchmark": "net plugin variants: size vs base; plugin stage build time aarch64 vs x86_64",
        "plugin": f"{tarball.name} (tests' stand-in)", "repeats": args.repeats, "sizes": sizes,
        "stage_seconds": times, "median_s": {"x86_64": mx, "aarch64": ma}, "ratio_aarch64_over_x86_64": ma / mx,
    }, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
