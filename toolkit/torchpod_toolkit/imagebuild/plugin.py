"""What a built NCCL net plugin says it is, read from the file alone (any architecture: an
aarch64 plugin is read on an x86_64 build host, where it cannot be loaded). Pure.

- ``exported``: the ``ncclNetPlugin_vN`` symbols in .dynsym;
- ``name``: the first field of ``ncclNetPlugin_v<newest>`` (a ``const char*``): in a shared
  object that pointer is filled by a RELATIVE relocation, whose addend is the string's
  address (R_X86_64_RELATIVE = 8, R_AARCH64_RELATIVE = 1027);
- ``version``: the package string autoconf compiles in (PACKAGE_STRING, "aws-ofi-nccl
  1.14.0", which aws-ofi-nccl logs at init; the test plugin carries one of the same form).
- ``machine``: the ELF e_machine (62 x86_64, 183 aarch64).

Used by the image build to write and check the ``io.torchpod.nccl-net-plugin`` label.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

RELATIVE = {62: 8, 183: 1027}
MACHINES = {62: "x86_64", 183: "aarch64"}
PACKAGE_RE = re.compile(rb"(aws-ofi-nccl|torchpod-test-net-plugin) (\d+\.\d+\.\d+(?:-aws)?)\x00")


@dataclass(frozen=True)
class PluginFile:
    machine: str
    exported: tuple[int, ...]
    name: str | None
    package: str | None
    version: str | None

    @property
    def label(self) -> str:
        return f"{self.name or '?'} ({self.package or '?'} {self.version or '?'})"


def read(data: bytes) -> PluginFile:
    """The plugin's facts from its bytes; a file that is not a whole 64-bit little-endian
    ELF (cut off, or offsets past its end) is a ValueError, never an IndexError."""
    if data[:4] != b"\x7fELF" or data[4:6] != b"\x02\x01":
        raise ValueError("not a 64-bit little-endian ELF file")
    try:
        return _read(data)
    except (struct.error, IndexError, OverflowError) as exc:
        raise ValueError(f"a cut-off or malformed ELF file ({exc})") from None


def _read(data: bytes) -> PluginFile:
    machine, = struct.unpack_from("<H", data, 0x12)
    phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", data, 0x36)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    loads = []
    for i in range(phnum):
        p_type, _, p_offset, p_vaddr, _, p_filesz, _, _ = struct.unpack_from("<IIQQQQQQ", data, phoff + i * phentsize)
        if p_type == 1:  # PT_LOAD
            loads.append((p_vaddr, p_offset, p_filesz))

    def at(vaddr: int) -> int | None:
        for base, off, size in loads:
            if base <= vaddr < base + size:
                return off + vaddr - base
        return None

    symbols: dict[str, int] = {}
    for sh in sections:
        if sh[1] != 11:  # SHT_DYNSYM
            continue
        strtab = sections[sh[6]]
        for k in range(sh[5] // 24):
            st_name, _, _, _, st_value, _ = struct.unpack_from("<IBBHQQ", data, sh[4] + k * 24)
            start = strtab[4] + st_name
            symbols[data[start:data.index(b"\0", start)].decode(errors="replace")] = st_value
    exported = tuple(sorted((int(m.group(1)) for s in symbols if (m := re.fullmatch(r"ncclNetPlugin_v(\d+)", s))),
                            reverse=True))
    name = None
    if exported:
        where = symbols[f"ncclNetPlugin_v{exported[0]}"]
        relative = RELATIVE.get(machine)
        for sh in sections:
            if sh[1] != 4:  # SHT_RELA
                continue
            for k in range(sh[5] // 24):
                r_offset, r_info, r_addend = struct.unpack_from("<QQq", data, sh[4] + k * 24)
                if r_offset == where and (r_info & 0xFFFFFFFF) == relative:
                    off = at(r_addend)
                    if off is not None:
                        name = data[off:data.index(b"\0", off)].decode(errors="replace")
    pkg = PACKAGE_RE.search(data)
    return PluginFile(machine=MACHINES.get(machine, str(machine)), exported=exported, name=name,
                      package=pkg.group(1).decode() if pkg else None, version=pkg.group(2).decode() if pkg else None)
