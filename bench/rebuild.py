"""Rebuilds: a full rebuild and a launcher-edit rebuild of one image per arch, with this tree's
build code and with an earlier commit's, side by side in one run; and whether two builds
with no cache give the same layers.

    python bench/rebuild.py [--image pytorch] [--before REV] [--arch x86_64,aarch64]

Prints a table and writes bench/results/rebuild.json.

- "full": BuildKit's layer cache pruned first (cache mounts kept). This tree then installs
  from its wheelhouse (filled once, outside the build) and a build with ``--no-cache``; the
  earlier tree, from a git worktree of REV with its own .cache, through its TORCHPOD_REBUILD
  token with pip's cache mount kept, which on this host downloads again anyway (the network
  path strips the headers pip's HTTP cache needs).
- "launcher edit": a new file under entrypoints/torchpod, then a build.
- "layers": this tree's two no-cache builds compared layer by layer; each layer that
  differs is named by the Dockerfile step that made it (the image's history).
The run ends with this tree's image for every arch measured.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "entrypoints"))
sys.path.insert(0, str(ROOT / "toolkit"))

from torchpod import readers  # noqa: E402
from torchpod.errors import InputError  # noqa: E402
from torchpod_toolkit.imagebuild import definitions, host, pipeline, proc  # noqa: E402

# run in a worktree of the baseline commit (--before), whose build code is its own
# torchpod_toolkit.engine module, not this tree's modules
OLD_BUILD = """
import sys, uuid
from pathlib import Path
tree = Path(sys.argv[1])
sys.path[:0] = [str(tree / "toolkit"), str(tree / "entrypoints")]
from torchpod_toolkit.imagebuild import definitions
from torchpod_toolkit import engine
defn = definitions.select(definitions.load_definitions(tree / "images"), sys.argv[2])
arch = defn.arch(sys.argv[3])
if sys.argv[4] == "base":  # its bases bootstrapped before anything is timed
    client, builder = engine.docker_client(), engine.find_builder()
    for a in {arch, engine.host_arch()}:
        engine.ensure_base(client, builder, defn, a, tree / ".cache")
    print(0.0)
    raise SystemExit(0)
token = uuid.uuid4().hex if sys.argv[4] == "full" else None
result = engine.build(defn, arch, root=tree, rebuild=token, quiet=True,
                      ca_bundle=engine.default_ca_bundle())
print(result.seconds)
"""


def prune_layer_cache() -> None:
    docker = host.find_builder().docker
    proc.run([docker, "builder", "prune", "-af", "--filter", "type=regular"], quiet=True, what="builder prune")


def launcher_marker(tree: Path) -> Path:
    marker = tree / "entrypoints" / "torchpod" / f"_bench_{uuid.uuid4().hex[:8]}.py"
    marker.write_text("# written by bench/rebuild.py to force a launcher-only rebuild\n")
    return marker


def old_build(tree: Path, image: str, arch: str, kind: str) -> float:
    out = proc.run([sys.executable, "-c", OLD_BUILD, str(tree), image, arch, kind], quiet=True,
                     what=f"the earlier tree's build ({kind}, {arch})")
    return float(out.strip().splitlines()[-1])


def before(tree: Path, image: str, arch: str, edit_only: bool = False) -> dict[str, float]:
    (tree / ".cache").mkdir(exist_ok=True)
    old_build(tree, image, arch, "base")
    out = {}
    if not edit_only:
        prune_layer_cache()
        out["full_s"] = round(old_build(tree, image, arch, "full"), 1)
    old_build(tree, image, arch, "edit")  # untimed: the cache as a plain build leaves it (no rebuild token)
    marker = launcher_marker(tree)
    try:
        out["launcher_edit_s"] = round(old_build(tree, image, arch, "edit"), 1)
    finally:
        marker.unlink()
    return out


def after_edit(defn, arch) -> float:
    pipeline.build(defn, arch, root=ROOT, quiet=True)
    marker = launcher_marker(ROOT)
    try:
        return pipeline.build(defn, arch, root=ROOT, quiet=True).seconds
    finally:
        marker.unlink()
        pipeline.build(defn, arch, root=ROOT, quiet=True)


LAYER_STEPS = ("RUN", "COPY", "ADD", "WORKDIR")  # the history entries that carry a layer (BuildKit)


def step_name(created_by: str) -> str:
    """A Dockerfile step as a short name docs/measurements.md can show (its cell grammar)."""
    text = created_by.replace(" # buildkit", "")
    if text.startswith("RUN ") and "/bin/sh -c " in text:
        text = "RUN " + text.split("/bin/sh -c ", 1)[1]
    text = re.sub(r"[^A-Za-z0-9 ._/+:,()-]", " ", text)
    return re.sub(r" +", " ", text).strip()[:60]


def layers_of(client, ref: str) -> list[tuple[str, str]]:
    """(diff id, the step that made it) for each layer, bottom first."""
    image = client.images.get(ref)
    steps = [h.get("CreatedBy", "") for h in reversed(image.history())
             if h.get("CreatedBy", "").split(" ", 1)[0] in LAYER_STEPS]
    ids = image.attrs["RootFS"]["Layers"]
    steps = [step_name(step) for step in steps]
    return list(zip(ids, steps if len(steps) == len(ids) else [f"layer {n + 1}" for n in range(len(ids))]))


def after(defn, arch, client) -> dict:
    pipeline.build(defn, arch, root=ROOT, quiet=True)  # the wheelhouse filled, the base bootstrapped
    times, listings = [], []
    for _ in range(2):
        prune_layer_cache()
        times.append(pipeline.build(defn, arch, root=ROOT, no_cache=True, quiet=True).seconds)
        listings.append(layers_of(client, defn.ref(arch)))
    marker = launcher_marker(ROOT)
    try:
        edit = pipeline.build(defn, arch, root=ROOT, quiet=True).seconds
    finally:
        marker.unlink()
    pipeline.build(defn, arch, root=ROOT, quiet=True)  # leave the image matching the tree
    (first, second) = listings
    differ = [step for (a, step), (b, _) in zip(first, second) if a != b]
    return {"full_s": round(min(times), 1), "launcher_edit_s": round(edit, 1), "layers": len(first),
            "layers_equal": sum(a == b for (a, _), (b, _) in zip(first, second)), "layers_differing": differ}


def read_results(path: Path) -> dict:
    """Results this script wrote on an earlier run, read through the bounded reader."""
    try:
        return json.loads(readers.read_text(path, what=str(path), expected="the results this script writes",
                                            cap=readers.DATA_CAP))
    except (InputError, ValueError) as exc:
        raise SystemExit(f"bench/rebuild.py: {exc}") from None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default="pytorch")
    parser.add_argument("--before", default="6c25b13", help="the commit whose build code is the baseline")
    parser.add_argument("--arch", default="", help="comma-separated; default: every arch of the image")
    parser.add_argument("--edit-only", action="store_true",
                        help="measure only the launcher-edit rebuilds (before and after, side by side) and update "
                             "those figures in bench/results/rebuild.json")
    args = parser.parse_args()
    defn = definitions.select(definitions.load_definitions(ROOT / "images"), args.image)
    arches = [defn.arch(a) for a in args.arch.split(",") if a] or list(defn.arches)
    client = host.docker_client()
    rows: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="torchpod-before-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), args.before],
                       check=True, capture_output=True)
        try:
            if args.edit_only:
                rows = read_results(ROOT / "bench" / "results" / "rebuild.json")["arches"]
            for arch in arches:
                if args.edit_only:
                    rows[arch.name]["before"].update(before(tree, defn.name, arch.name, edit_only=True))
                    rows[arch.name]["after"]["launcher_edit_s"] = round(after_edit(defn, arch), 1)
                else:
                    rows[arch.name] = {"before": before(tree, defn.name, arch.name), "after": after(defn, arch, client)}
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True)
    header = f"{'arch':8} {'full before s':>13} {'full after s':>12} {'edit before s':>13} {'edit after s':>12} " \
             f"{'layers equal':>12}"
    print(header + "\n" + "-" * len(header))
    for name, r in rows.items():
        b, a = r["before"], r["after"]
        print(f"{name:8} {b['full_s']:13.1f} {a['full_s']:12.1f} {b['launcher_edit_s']:13.1f} "
              f"{a['launcher_edit_s']:12.1f} {a['layers_equal']:>7} of {a['layers']:<2}")
        for step in a["layers_differing"]:
            print(f"         differs: {step}")
    out = ROOT / "bench" / "results" / "rebuild.json"
    previous = read_results(out) if args.edit_only else {}
    out.write_text(json.dumps({"image": defn.name, "host": platform.machine(), "before": args.before,
                               "when": previous.get("when") or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                               "edit_only_rerun": bool(args.edit_only), "arches": rows}, indent=2) + "\n")
    print(f"\nwrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
