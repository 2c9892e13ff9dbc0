"""What an edit to the build-host toolkit costs an image: nothing, measured.

    python bench/toolkit_edit.py [--image pytorch] [--arch x86_64]

Builds the image (so the cache holds the current tree), appends a comment to a toolkit
module, builds again, and reports how many Dockerfile steps BuildKit took from its cache,
whether the image's layer list (RootFS) is byte-identical, and the rebuild's seconds
(probe and labels included). The edited file is restored whatever happens. Writes
bench/results/toolkit_edit.json.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "entrypoints"))
sys.path.insert(0, str(ROOT / "toolkit"))

from torchpod import readers  # noqa: E402
from torchpod_toolkit.imagebuild import host  # noqa: E402
from torchpod_toolkit.imagebuild.definitions import DEFAULT_IMAGE, load_definitions  # noqa: E402

EDITED = ROOT / "toolkit" / "torchpod_toolkit" / "imagebuild" / "registry.py"


def build(image: str, arch: str) -> tuple[str, float]:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "invoke", "build", "--image", image, "--arch", arch],
                          cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"invoke build failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return proc.stdout + proc.stderr, time.monotonic() - started


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=DEFAULT_IMAGE)
    parser.add_argument("--arch", default="x86_64")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "toolkit_edit.json"))
    args = parser.parse_args(argv)
    defn = load_definitions(ROOT / "images")[args.image]
    ref = defn.ref(defn.arch(args.arch))
    client = host.docker_client()
    build(args.image, args.arch)
    before = client.images.get(ref).attrs["RootFS"]["Layers"]
    original = readers.read_text(EDITED, what=str(EDITED), expected="a toolkit source file", cap=readers.DATA_CAP)
    try:
        EDITED.write_text(original + f"# bench/toolkit_edit.py {time.time()}\n")
        log, seconds = build(args.image, args.arch)
    finally:
        EDITED.write_text(original)
    after = client.images.get(ref).attrs["RootFS"]["Layers"]
    # every step that makes a layer (not [internal] context loading, not FROM resolving the base)
    steps = set(re.findall(r"^#(\d+) \[(?!internal)[^\]]*\] (?!FROM )", log, flags=re.M))
    cached = set(re.findall(r"^#(\d+) CACHED", log, flags=re.M))
    row = {"image": ref, "edited": str(EDITED.relative_to(ROOT)), "dockerfile_steps": len(steps),
           "cached_steps": len(steps & cached), "layers_identical": before == after,
           "rebuild_seconds": round(seconds, 1)}
    print(f"{'image':44} steps  cached  layers identical  rebuild")
    print(f"{ref:44} {row['dockerfile_steps']:5}  {row['cached_steps']:6}  {str(row['layers_identical']):16}  "
          f"{row['rebuild_seconds']} s")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(row, indent=2) + "\n")
    return 0 if row["layers_identical"] and row["cached_steps"] == row["dockerfile_steps"] else 1


if __name__ == "__main__":
    sys.exit(main())
