"""The one place where CPU architecture names are normalised.

Users, Docker, Debian and Python each spell the two architectures differently; every
other module goes through :func:`normalise_arch` and the :class:`Arch` it returns.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import InputError


@dataclass(frozen=True)
class Arch:
    name: str  # canonical: what `uname -m` prints and what tags carry
    docker: str  # platform for `docker build --platform`
    debian: str  # dpkg architecture, for the bootstrapped rootfs
    elf_machine: str  # e_machine as `file`/pyelftools name it
    elf_code: int  # e_machine numeric value in the ELF header
    qemu: str | None  # binfmt_misc entry that runs it on a foreign host


ARCHES: dict[str, Arch] = {
    "x86_64": Arch("x86_64", "linux/amd64", "amd64", "x86-64", 62, "qemu-x86_64"),
    "aarch64": Arch("aarch64", "linux/arm64", "arm64", "aarch64", 183, "qemu-aarch64"),
}

_ALIASES = {
    "x86_64": "x86_64",
    "amd64": "x86_64",
    "x86-64": "x86_64",
    "linux/amd64": "x86_64",
    "aarch64": "aarch64",
    "arm64": "aarch64",
    "linux/arm64": "aarch64",
    "linux/arm64/v8": "aarch64",
}


def normalise_arch(value: str, *, what: str = "--arch") -> Arch:
    """Return the :class:`Arch` for any common spelling, or raise naming ``what``."""
    key = value.strip().lower()
    if key not in _ALIASES:
        raise InputError(
            f"{what}={value!r} is not a known architecture; expected one of "
            "x86_64 (amd64) or aarch64 (arm64)"
        )
    return ARCHES[_ALIASES[key]]
