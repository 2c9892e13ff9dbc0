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
from ..errors import InputError

PRESETS_FILE = Path(__file__).with_name("presets.json")
FABRICS = ("roce", "infiniband", "efa", "slingshot")
_PRESET_KEYS = {"fabric", "gpus_per_node", "source", "env", "shm"}


@dataclass(frozen=True)
class Preset:
    name: str
    fabric: str
    gpus_per_node: int
    source: str
    env: tuple[tuple[str, str, str], ...]  # (variable, value, source)
    shm: str = ""  # the memory-backed /dev/shm size the shape's pods get (manifests), e.g. 32Gi


def _preset(path: Path, name: str, raw: object) -> Preset:
    where = f"{path}: {name}"
    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected an object with {', '.join(sorted(_PRESET_KEYS))}")
    unknown = set(raw) - _PRESET_KEYS
    if unknown:
        raise InputError(f"{where}: unknown key {sorted(unknown)[0]!r}; expected one of {', '.join(sorted(_PRESET_KEYS))}")
    if raw.get("fabric") not in FABRICS:
        raise InputError(f"{where}.fabric={raw.get('fabric')!r}; expected one of {', '.join(FABRICS)}")
    if not isinstance(raw.get("gpus_per_node"), int) or raw["gpus_per_node"] < 1:
        raise InputError(f"{where}.gpus_per_node={raw.get('gpus_per_node')!r}; expected a count >= 1")
    if not isinstance(raw.get("source"), str) or not raw["source"].strip():
        raise InputError(f"{where}.source is missing; expected the upstream document the values come from")
    shm = raw.get("shm", "")
    if shm and not (isinstance(shm, str) and re.fullmatch(r"[1-9][0-9]*[MG]i", shm)):
        raise InputError(f"{where}.shm={shm!r}; expected a Kubernetes size such as '32Gi'")
    env = []
    for var, spec in (raw.get("env") or {}).items():
        if not isinstance(spec, dict) or set(spec) - {"value", "source"} or not isinstance(spec.get("value"), str):
            raise InputError(f"{where}.env.{var}={spec!r}; expected {{\"value\": \"...\"[, \"source\": \"...\"]}}")
        env.append((var, spec["value"], spec.get("source") or raw["source"]))
    return Preset(name, raw["fabric"], raw["gpus_per_node"], raw["source"], tuple(env), shm)


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
    name = (env.get("TORCHPOD_PRESET") or "").strip()
    if not name:
        return None
    presets = shipped()
    if name not in presets:
        raise InputError(f"TORCHPOD_PRESET={name!r} is not a known preset; expected one of {', '.join(presets)}")
    return presets[name]
