"""Shape presets (presets.json beside this file): the fabric policy NCCL cannot infer for a
machine shape (traffic class, service level, timeouts, QPs, which NICs are front-end),
each value with its upstream source. JSON, not YAML: the launcher runs on the standard
library alone. Loaded once and validated at load: an unknown key, a value that is not a
string, a preset without a source are errors naming the file and the key.

Precedence for a variable: the user's environment > TORCHPOD_PRESET > detection.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Mapping

from .. import readers
from ..contract import ENV_PRESET, setting
from ..errors import InputError
from .registry import NAMES, by_name

PRESETS_FILE = Path(__file__).with_name("presets.json")
# fabric_settings: true takes the fabric record's plugin environment (NCCL_NET and the
# fabric's settings, each with its citation) before the preset's own env, so a fabric's
# settings are written once, in its module.
_PRESET_KEYS = {"fabric", "gpus_per_node", "source", "env", "shm", "fabric_settings", "preflight_floor"}
_FLOOR_KEYS = {"busbw_gbps", "bytes", "nodes", "algo", "basis", "source"}
# The algorithms a floor's figure can have been measured with: preflight measures with Ring.
RING, NCCLS_CHOICE = "Ring", "NCCL's choice"


@dataclass(frozen=True)
class Floor:
    """The job all-reduce busbw a shape should reach (torchpod.preflight), from a public figure."""

    busbw_gbps: float
    bytes: int
    nodes: int
    algo: str  # RING or NCCLS_CHOICE: what the cited figure was measured with
    basis: str  # how the figure was made (a threshold, or a share of a published run)
    source: str


@dataclass(frozen=True)
class Preset:
    name: str
    fabric: str
    gpus_per_node: int
    source: str
    env: tuple[tuple[str, str, str], ...]  # (variable, value, source)
    shm: str = ""  # the memory-backed /dev/shm size the shape's pods get (manifests), e.g. 32Gi
    floor: Floor | None = None  # what torchpod.preflight expects of the job's all-reduce


def _preset(path: Path, name: str, raw: object) -> Preset:
    where = f"{path}: {name}"
    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected an object with {', '.join(sorted(_PRESET_KEYS))}")
    unknown = set(raw) - _PRESET_KEYS
    if unknown:
        raise InputError(f"{where}: unknown key {sorted(unknown)[0]!r}; "
                         f"expected one of {', '.join(sorted(_PRESET_KEYS))}")
    if raw.get("fabric") not in NAMES:
        raise InputError(f"{where}.fabric={raw.get('fabric')!r}; expected one of {', '.join(NAMES)}")
    inherited = _fabric_settings(where, raw)
    if not isinstance(raw.get("gpus_per_node"), int) or raw["gpus_per_node"] < 1:
        raise InputError(f"{where}.gpus_per_node={raw.get('gpus_per_node')!r}; expected a count >= 1")
    # without a source of its own, the preset cites the fabric's settings (the last ones listed)
    source = raw.get("source", inherited[-1][2] if inherited else None)
    if not isinstance(source, str) or not source.strip():
        raise InputError(f"{where}.source is missing; expected the upstream document the values come from")
    shm = raw.get("shm", "")
    if shm and not (isinstance(shm, str) and re.fullmatch(r"[1-9][0-9]*[MG]i", shm)):
        raise InputError(f"{where}.shm={shm!r}; expected a Kubernetes size such as '32Gi'")
    env = list(inherited)
    for var, spec in (raw.get("env") or {}).items():
        if not isinstance(spec, dict) or set(spec) - {"value", "source"} or not isinstance(spec.get("value"), str):
            raise InputError(f"{where}.env.{var}={spec!r}; expected {{\"value\": \"...\"[, \"source\": \"...\"]}}")
        if any(var == known for known, _, _ in inherited):
            raise InputError(f"{where}.env.{var} is also one of fabric {raw['fabric']}'s settings (fabric_settings); "
                             "expected each variable once")
        env.append((var, spec["value"], spec.get("source") or source))
    floor = _floor(where, raw["preflight_floor"]) if "preflight_floor" in raw else None
    return Preset(name, raw["fabric"], raw["gpus_per_node"], source, tuple(env), shm, floor)


def _floor(where: str, raw: object) -> Floor:
    where = f"{where}.preflight_floor"
    form = ("expected {\"busbw_gbps\": GB/s > 0, \"bytes\": a size >= 4, \"nodes\": >= 2, "
            f"\"algo\": {RING!r} or {NCCLS_CHOICE!r}, \"basis\": text, \"source\": text}}")
    if not isinstance(raw, dict) or set(raw) != _FLOOR_KEYS:
        raise InputError(f"{where}={raw!r}; {form}")
    gbps, size, nodes = raw["busbw_gbps"], raw["bytes"], raw["nodes"]
    numbers_ok = (not any(isinstance(v, bool) for v in (gbps, size, nodes)) and isinstance(gbps, (int, float))
                  and 0 < gbps < float("inf") and isinstance(size, int) and size >= 4 and isinstance(nodes, int)
                  and nodes >= 2)
    texts_ok = raw["algo"] in (RING, NCCLS_CHOICE) and all(
        isinstance(raw[k], str) and raw[k].strip() for k in ("basis", "source"))
    if not numbers_ok or not texts_ok:
        raise InputError(f"{where}={raw!r}; {form}")
    return Floor(float(gbps), size, nodes, raw["algo"], raw["basis"], raw["source"])


def _fabric_settings(where: str, raw: dict) -> list[tuple[str, str, str]]:
    """(variable, value, source) of the fabric record's plugin environment, when asked for."""
    flag = raw.get("fabric_settings", False)
    if not isinstance(flag, bool):
        raise InputError(f"{where}.fabric_settings={flag!r}; expected true or false")
    fabric = by_name(raw["fabric"]) if flag else None
    if fabric is None:
        return []
    if not fabric.plugin_env:
        raise InputError(f"{where}.fabric_settings is true but fabric {fabric.name!r} has no settings; expected "
                         "it only for a fabric reached through the net plugin (efa, slingshot)")
    return [(s.var, s.value, s.source) for s in fabric.plugin_env]


def load(path: Path = PRESETS_FILE) -> dict[str, Preset]:
    text = readers.read_text(path, what=f"presets file {str(path)!r}", cap=readers.DATA_CAP,
                             expected="the presets file torchpod ships")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InputError(f"{path}: cannot be read as JSON ({exc}); expected the presets file torchpod ships") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: holds {type(data).__name__}; expected a JSON object of presets by name")
    return {name: _preset(path, name, raw) for name, raw in data.items() if not name.startswith("_")}


@lru_cache(maxsize=None)
def shipped() -> dict[str, Preset]:
    return load()


def chosen(env: Mapping[str, str]) -> Preset | None:
    """The preset TORCHPOD_PRESET names, None when unset, an error for an unknown name."""
    name = setting(env, ENV_PRESET)
    if not name:
        return None
    presets = shipped()
    if name not in presets:
        raise InputError(f"{ENV_PRESET.name}={name!r} is not a known preset; expected one of {', '.join(presets)}")
    return presets[name]
