"""The NCCL net plugin as NCCL would find and load it, checked without a GPU.

NCCL >= 2.22 opens its net plugin only inside ncclCommInitRank, after CUDA is set up, so a
CPU-only check cannot watch NCCL do it. This module does what NCCL does instead
(NVIDIA/nccl src/plugin/plugin_open.cc and net.cc, 2.30):

- names: NCCL_NET_PLUGIN unset -> ``libnccl-net.so``; ``none`` -> no plugin; else each
  ','-separated name as given, then, for a bare name that is not ``lib*.so``,
  ``libnccl-net-<name>.so``. Setting NCCL_NET_PLUGIN drops the default attempt.
- ``dlopen(name, RTLD_NOW | RTLD_LOCAL)`` with the loader's normal search (LD_LIBRARY_PATH
  first); the dlerror text when it fails;
- the ``ncclNetPlugin_vN`` symbols it exports against the ones the bundled NCCL tries,
  newest first (SYMBOLS_BY_NCCL), and the plugin's name (the struct's first field);
- the ``libfabric.so.1`` the plugin mapped: its path, ``fi_version()`` and the newest
  ``FABRIC_1.N`` symbol version it defines (its ABI), read from its ELF .gnu.version_d.

``probe`` runs in a child process (``python -m torchpod.netplugin NAME...`` prints JSON),
so a plugin's constructors or a crash never touch the caller; ``run_probe`` starts it.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import struct
import subprocess
import sys
from importlib import metadata
from typing import Mapping, Sequence

from . import readers
from .errors import InputError

# ncclNetPlugin_vN symbols each NCCL release tries, newest first (git grep over the
# NVIDIA/nccl release tags v2.18.1-1 .. v2.30.7-1, src/plugin/).
SYMBOLS_BY_NCCL = (
    ((2, 30), (12, 11, 10, 9, 8, 7, 6)),
    ((2, 28), (11, 10, 9, 8, 7, 6)),
    ((2, 26), (10, 9, 8, 7, 6)),
    ((2, 24), (9, 8, 7, 6, 5)),
    ((2, 20), (8, 7, 6, 5)),
    ((2, 19), (7, 6, 5)),
    ((2, 18), (6, 5, 4)),
)
DEFAULT_NAME = "libnccl-net.so"
PROBE_TIMEOUT_S = 10.0


def wanted(nccl: tuple[int, ...] | None) -> tuple[int, ...]:
    """The plugin API versions ``nccl`` tries, newest first (the newest table row if unknown)."""
    if nccl is None:
        return SYMBOLS_BY_NCCL[0][1]
    for since, versions in SYMBOLS_BY_NCCL:
        if tuple(nccl[:2]) >= since:
            return versions
    return SYMBOLS_BY_NCCL[-1][1]


def candidates(env: Mapping[str, str]) -> list[tuple[str, str]]:
    """(file name NCCL dlopens, why), in NCCL's order."""
    given = env.get("NCCL_NET_PLUGIN")
    if given is None:
        return [(DEFAULT_NAME, "NCCL_NET_PLUGIN is unset: NCCL tries libnccl-net.so")]
    if given.strip().lower() == "none":
        return []
    out = []
    for name in (n for n in given.split(",") if n):
        out.append((name, f"NCCL_NET_PLUGIN={given}"))
        if "/" not in name and not (name.startswith("lib") and name.endswith(".so")):
            out.append((f"libnccl-net-{name}.so", f"NCCL_NET_PLUGIN={given}, as libnccl-net-<name>.so"))
    return out


def bundled_nccl() -> tuple[int, int, int] | None:
    """The NCCL the image's torch uses: the nvidia-nccl-cuXX wheel's version (no torch import)."""
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name.startswith("nvidia-nccl"):
            m = re.match(r"([0-9]+)\.([0-9]+)\.([0-9]+)", dist.version)
            if m:
                return tuple(int(x) for x in m.groups())  # type: ignore[return-value]
    return None


def elf_version_defs(path: str) -> list[str]:
    """Symbol version names a shared object defines (SHT_GNU_verdef), e.g. FABRIC_1.7."""
    data = readers.read_bytes(path, what=f"libfabric {path!r}", cap=readers.LIBRARY_CAP,
                              expected="the shared library the plugin mapped")
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2:  # 64-bit only
        return []
    end = "<" if data[5] == 1 else ">"
    shoff, = struct.unpack_from(end + "Q", data, 0x28)
    shentsize, shnum = struct.unpack_from(end + "HH", data, 0x3A)
    sections = [struct.unpack_from(end + "IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = []
    for sh in sections:
        if sh[1] != 0x6FFFFFFD:  # SHT_GNU_verdef
            continue
        strtab = sections[sh[6]]  # sh_link: the dynamic string table
        off = sh[4]
        while True:
            _, flags, _, cnt, _, aux, nxt = struct.unpack_from(end + "HHHHIII", data, off)
            if cnt:
                name_off, = struct.unpack_from(end + "I", data, off + aux)
                start = strtab[4] + name_off
                name = data[start:data.index(b"\0", start)].decode()
                if not flags & 1:  # VER_FLG_BASE names the file itself
                    names.append(name)
            if not nxt:
                break
            off += nxt
    return names


def _abi(path: str) -> str | None:
    try:
        defined = elf_version_defs(path)
    except (InputError, struct.error, ValueError, IndexError):  # not a readable ELF: no ABI to tell
        return None
    versions = [v for v in defined if re.fullmatch(r"FABRIC_[0-9]+\.[0-9]+", v)]
    return max(versions, key=lambda v: tuple(int(x) for x in v.split("_")[1].split("."))) if versions else None


def _mapped(pattern: str, maps: str = "/proc/self/maps") -> str | None:
    """The path of the first library mapped into this process whose file name matches
    ``pattern``, from procfs's memory map streamed through the bounded reader; None when
    none matches or the map cannot be read."""
    try:
        for line in readers.Lines(maps, what=maps, expected="procfs's memory map of this process"):
            parts = line.split()
            if len(parts) >= 6 and re.search(pattern, os.path.basename(parts[5])):
                return parts[5]
    except InputError:
        pass
    return None


def probe(names: Sequence[str], nccl: tuple[int, ...] | None) -> dict:
    """Load the first candidate that loads, as NCCL would; report what it is. In-process:
    call it in a child (``main``)."""
    tried = []
    for name in names:
        try:
            lib = ctypes.CDLL(name, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        except OSError as exc:
            tried.append({"name": name, "error": str(exc)})
            continue
        exported = [v for v in range(16, 1, -1) if hasattr(lib, f"ncclNetPlugin_v{v}")]
        want = wanted(nccl)
        chosen = next((v for v in want if v in exported), None)
        plugin_name = None
        if exported:
            plugin_name = ctypes.c_char_p.in_dll(lib, f"ncclNetPlugin_v{chosen or exported[0]}").value
        path = _mapped(r"^" + re.escape(os.path.basename(name)).replace(r"\.so", r".*\.so")) or name
        out: dict = {"loaded": name, "path": path,
                     "tried": tried, "exported": exported, "nccl": ".".join(map(str, nccl)) if nccl else None,
                     "wanted": list(want), "chosen": chosen,
                     "plugin_name": plugin_name.decode(errors="replace") if plugin_name else None, "libfabric": None}
        fabric = _mapped(r"^libfabric\.so")
        if fabric:
            info: dict = {"path": fabric, "abi": _abi(fabric), "version": None}
            try:
                v = ctypes.CDLL(fabric).fi_version()
                info["version"] = f"{(v >> 16) & 0xFFFF}.{v & 0xFFFF}"
            except (OSError, AttributeError):
                pass
            out["libfabric"] = info
        return out
    return {"loaded": None, "tried": tried, "nccl": ".".join(map(str, nccl)) if nccl else None,
            "wanted": list(wanted(nccl))}


def run_probe(env: Mapping[str, str], names: Sequence[str], timeout: float = PROBE_TIMEOUT_S) -> dict:
    """``probe`` in a child process with ``env`` (LD_LIBRARY_PATH as the workers get it)."""
    if not names:
        return {"loaded": None, "tried": [], "skipped": "NCCL_NET_PLUGIN=none: NCCL loads no plugin"}
    try:
        # errors="replace": a plugin's constructor may print anything, in any encoding
        done = subprocess.run([sys.executable, "-m", "torchpod.netplugin", *names], env=dict(env),
                              capture_output=True, text=True, errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"loaded": None, "tried": [], "crashed": f"the probe did not return within {timeout:.0f} s"}
    except OSError as exc:
        return {"loaded": None, "tried": [], "crashed": f"the probe could not start: {exc.strerror or exc}"}
    try:
        answer = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        answer = None
    if isinstance(answer, dict):
        return answer
    return {"loaded": None, "tried": [], "crashed": f"the probe exited {done.returncode}: "
            f"{(done.stderr or done.stdout).strip()[-300:]}"}


def main(argv: Sequence[str] | None = None) -> int:
    names = list(sys.argv[1:] if argv is None else argv)
    print(json.dumps(probe(names, bundled_nccl())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
