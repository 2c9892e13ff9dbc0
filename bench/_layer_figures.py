"""The pure half of bench/layers.py: what it reads from the documents its tools print, and
the figures and the choice it derives from its runs. No process, file or network here.

- reading: an image manifest's layers (``parse_manifest``) and their one compression
  (``compression``); the layers the launcher's step made, from ``docker history``
  (``launcher_layers``); the filesystem a folder is on, from /proc/self/mountinfo
  (``mounts``, ``filesystem``); a failed command's error, as the one line a report shows
  (``last_line``);
- figures: the order each round pulls the formats in (``alternated``), each format's median
  and spread of pull times, zstd over gzip (``ratio``), and the printed ``table``;
- the choice of default format (``choose``), from the medians, the spreads and what each
  runtime users run reads: measured here, or read in its source (``READ_IN_SOURCE``).

bench/layers.py, the program, imports this module by name: bench/ is on ``sys.path`` when a
script in it runs by path. The name starts with ``_``: a helper, not a program of its own,
so it has no invoke task.
"""

from __future__ import annotations

import json
import re
import statistics
from typing import Any

FORMATS = ("gzip", "zstd")
MEDIA_TYPES = {  # a layer's media type -> its compression (Docker's schema 2 and OCI's)
    "application/vnd.docker.image.rootfs.diff.tar.gzip": "gzip",
    "application/vnd.oci.image.layer.v1.tar+gzip": "gzip",
    "application/vnd.oci.image.layer.v1.tar+zstd": "zstd",
}
# the history entries that carry a layer (BuildKit), bottom first, as bench/rebuild.py counts them
LAYER_STEPS = ("RUN", "COPY", "ADD", "WORKDIR")
# docker/Dockerfile, runtime-base: the RUN that copies entrypoints/torchpod into site-packages
LAUNCHER_STEP = re.compile(r'cp -R /srv "\$site/torchpod"')
# Runtimes users run the image with; each is measured here or read in its source, by version.
USER_RUNTIMES = ("Docker Engine", "enroot", "Apptainer")


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


def last_line(text: str) -> str:
    """The last non-empty line of a command's output, printable and at most 200 characters."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    line = lines[-1] if lines else "(no output)"
    return "".join(c if c.isprintable() else "?" for c in line)[:200]


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
