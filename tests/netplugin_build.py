"""Build torchpod's test NCCL net plugin and stand-in libfabrics (tests/netplugin/) with the
host's C compiler, the way a release is built: a tarball, `./configure --prefix=...
--with-cuda=... --with-libfabric=...`, `make install`. Shared by the test tiers (a plain
module on pytest's pythonpath). Nothing here is upstream code."""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
from pathlib import Path

from torchpod_toolkit.imagebuild.sources import pack_release

from paths import TESTS

SRC = TESTS / "netplugin"
RELEASE = json.loads((SRC / "release.json").read_text())
NAME, VERSION, SOURCES = RELEASE["name"], RELEASE["version"], tuple(RELEASE["files"])
# libfabric's symbol-version nodes, as its libfabric.map names them; the newest one is the ABI.
MAPS = {
    "FABRIC_1.6": "FABRIC_1.0 { global: fi_version; local: *; };\nFABRIC_1.6 { } FABRIC_1.0;\n",
    "FABRIC_1.7": "FABRIC_1.0 { global: fi_version; local: *; };\nFABRIC_1.6 { } FABRIC_1.0;\n"
                  "FABRIC_1.7 { } FABRIC_1.6;\n",
}


def compiler() -> str:
    """The host's C compiler; a skip (locally) or failure (CI) naming the package when absent."""
    found = shutil.which("gcc") or shutil.which("cc")
    if found is None:
        from needs import missing

        missing("a C compiler for the test NCCL net plugin (apt-get install gcc libc6-dev make, or ./setup.sh --tests)")
    return found


def fake_libfabric(dest: Path, abi: str, minor: int, cc: str = "gcc") -> Path:
    """dest/lib/libfabric.so.1 (+ the libfabric.so link a linker wants) with ABI ``abi``."""
    lib = dest / "lib"
    lib.mkdir(parents=True, exist_ok=True)
    mapfile = dest / "libfabric.map"
    mapfile.write_text(MAPS[abi])
    flags = ["-DNEW_ABI"] if abi == "FABRIC_1.7" else []
    subprocess.run([cc, "-O2", "-fPIC", "-shared", f"-DFI_MINOR={minor}", *flags, f"-Wl,--version-script={mapfile}",
                    "-Wl,-soname,libfabric.so.1", "-o", str(lib / "libfabric.so.1"), str(SRC / "fake_libfabric.c")],
                   check=True, capture_output=True, text=True)
    (lib / "libfabric.so").unlink(missing_ok=True)
    (lib / "libfabric.so").symlink_to("libfabric.so.1")
    return lib / "libfabric.so.1"


def release_tarball(dest: Path) -> Path:
    """The plugin's sources as a release tarball (NAME-VERSION/...), as `invoke test` packs it."""
    return pack_release(SRC, SOURCES, NAME, VERSION, dest)


def build_plugin(tarball: Path, libfabric: Path, prefix: Path, work: Path, cc: str = "gcc") -> Path:
    """configure + make install of ``tarball`` against the libfabric under ``libfabric``."""
    with tarfile.open(tarball) as tar:
        tar.extractall(work, filter="data")
    tree = work / f"{NAME}-{VERSION}"
    env = {"PATH": "/usr/bin:/bin", "CC": cc}
    subprocess.run(["./configure", f"--prefix={prefix}", "--with-cuda=/usr/local/cuda",
                    f"--with-libfabric={libfabric}", "--disable-tests"], cwd=tree, env=env, check=True,
                   capture_output=True, text=True)
    subprocess.run(["make", "install"], cwd=tree, env=env, check=True, capture_output=True, text=True)
    return prefix / "lib" / "libnccl-net.so"


def build_set(root: Path, cc: str = "gcc") -> dict[str, Path]:
    """Site libfabric (ABI 1.6, version 1.17), a newer one (ABI 1.7, 1.20), a plugin built
    against each: 'site_lib', 'new_lib', 'good' (loads with the site's), 'broken' (does not)."""
    old = fake_libfabric(root / "fabric-1.17", "FABRIC_1.6", 17, cc)
    new = fake_libfabric(root / "fabric-1.20", "FABRIC_1.7", 20, cc)
    tarball = release_tarball(root)
    good = build_plugin(tarball, old.parent.parent, root / "good", root / "build-good", cc)
    broken = build_plugin(tarball, new.parent.parent, root / "broken", root / "build-broken", cc)
    return {"site_lib": old.parent, "new_lib": new.parent, "good": good, "broken": broken, "tarball": tarball}
