"""A content-addressed wheelhouse outside the checkout, filled from the locks.

Every locked file is stored once, as ``<root>/sha256/<hex>/<filename>``, whatever image,
arch or checkout asked for it; a source-only package's wheel, built here from its
hash-checked sdist, as ``<root>/built/<sdist hex>/<wheel>``. A build hard-links exactly its
lock's files into ``.cache/wheels/payload`` of the build context (the payload stage
bind-mounts it and installs with ``--no-index --require-hashes``): a rebuild, a second
image sharing wheels, or CI on a machine that built before downloads nothing.

The root is ``TORCHPOD_WHEELHOUSE`` (:data:`torchpod_toolkit.settings.WHEELHOUSE`), else
``$XDG_CACHE_HOME/torchpod/wheelhouse``, else ``~/.cache/torchpod/wheelhouse``. pip's own
cache cannot play this part: the network path here strips the cache headers pip's HTTP
cache keys on, so each build fetched ~2.5 GB per arch again.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Mapping, Sequence

from torchpod import readers
from torchpod.contract import Arch, setting
from torchpod.errors import InputError, RuntimeFailure

from ..settings import WHEELHOUSE
from . import commands
from .definitions import ImageDef
from .locks import Lock, Wheel
from .proc import run
from .sources import sha256_of

STAGE = Path(".cache") / "wheels" / "payload"  # in the build context; docker/Dockerfile mounts it
LOCKED = "locked.txt"  # the lock's wheel lines, in the staged folder
BUILT = "built"  # the source-only packages' wheels, and built.txt naming them
BACKENDS = "backend"  # the pinned build backend, installed once per pin
WHEEL_FILE_CAP = 64 << 10  # a wheel's *.dist-info/WHEEL: a few lines (PEP 427)

# The build backend that turns a locked sdist into its wheel, pinned by hash. The wheel's
# WHEEL file names it ("Generator: setuptools (84.2.1)"), so a build in pip's isolated
# environment, which takes the newest setuptools the index serves that day, gave other
# bytes, and another payload key, from the same lock a few weeks later. 82.0.1 is the last
# setuptools for Python 3.9 (data-requires-python ">=3.9" on https://pypi.org/simple/setuptools/).
BACKEND = Wheel("setuptools", "82.0.1", "a59e362652f08dcd477c78bb6e7bd9d80a7995bc73ce773050228a348ce2e5bb",
                "setuptools-82.0.1-py3-none-any.whl")
BACKEND_GENERATOR = f"{BACKEND.name} ({BACKEND.version})"


def root(env: Mapping[str, str] = os.environ) -> Path:
    """The wheelhouse's folder, from ``env`` (this process's environment unless given): a
    value :data:`torchpod_toolkit.settings.WHEELHOUSE` refuses (a file, a control character)
    is one line."""
    chosen = setting(env, WHEELHOUSE)
    if chosen:
        return Path(chosen)
    cache = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "torchpod" / "wheelhouse"


def stored(home: Path, wheel: Wheel) -> Path:
    return home / "sha256" / wheel.sha256 / wheel.file


def built(home: Path, wheel: Wheel) -> Path | None:
    """The wheel built from a stored sdist, if it was built."""
    folder = home / BUILT / wheel.sha256
    found = sorted(folder.glob("*.whl")) if folder.is_dir() else []
    # a wheel another backend built (before the pin, or another pin) is built again
    return found[0] if found and generator(found[0]) == BACKEND_GENERATOR else None


def generator(wheel: Path) -> str | None:
    """The ``Generator:`` of a wheel's ``*.dist-info/WHEEL`` (PEP 427), or None when the wheel
    has no such file or line, that file is over WHEEL_FILE_CAP, or the wheel is no zip at all
    (or no regular file: it is opened through the bounded reader, so a FIFO is never waited on).
    Only WHEEL_FILE_CAP + 1 bytes of the member are inflated, whatever it claims to hold."""
    try:
        fd = readers.open_regular(wheel, str(wheel), "a wheel", None)
    except InputError:
        return None
    try:
        with os.fdopen(fd, "rb") as raw, zipfile.ZipFile(raw) as whl:
            names = [n for n in whl.namelist() if n.count("/") == 1 and n.endswith(".dist-info/WHEEL")]
            if len(names) != 1:
                return None
            with whl.open(names[0]) as member:
                data = member.read(WHEEL_FILE_CAP + 1)
    except (OSError, zipfile.BadZipFile):
        return None
    if len(data) > WHEEL_FILE_CAP:
        return None
    text = data.decode("utf-8", "replace")
    lines = [line.partition(":")[2].strip() for line in text.splitlines() if line.startswith("Generator:")]
    return lines[0] if len(lines) == 1 else None


def missing(home: Path, lock: Lock) -> list[Wheel]:
    return [w for w in lock.entries if not stored(home, w).is_file()
            or (w.sdist and built(home, w) is None)]


def _requirements(folder: Path, wheels: Sequence[Wheel]) -> Path:
    path = folder / "requirements.txt"
    path.write_text("".join(w.line + "\n" for w in wheels))
    return path


def fill(defn: ImageDef, arch: Arch, lock: Lock, *, home: Path, ca_bundle: Path | None, offline: bool,
         python: str = sys.executable, sources_only: bool = False) -> int:
    """Download (hash-checked) what the wheelhouse lacks for ``lock``; the number of files fetched.
    With ``sources_only``, only the source-only packages and the wheels built from them (what
    the payload key hashes, kilobytes), not the lock's wheels (gigabytes)."""
    absent = [w for w in missing(home, lock) if w.sdist or not sources_only]
    if not absent:
        return 0
    if offline:
        first = absent[0]
        # a stored sdist is missing only its wheel: none built yet, or one another setuptools built
        what = f"a wheel built by {BACKEND_GENERATOR} from {first.file}" if (
            first.sdist and stored(home, first).is_file()) else first.file
        raise InputError(f"--offline: {what} ({first.name}=={first.version}, sha256 {first.sha256[:12]}) "
                         f"is not in the wheelhouse {home}, nor {len(absent) - 1} more; run `invoke wheels --image "
                         f"{defn.name} --arch {arch.name}` where {defn.torch.index_url} is reachable, then copy {home}")
    home.mkdir(parents=True, exist_ok=True)
    cert = ["--cert", str(ca_bundle)] if ca_bundle is not None else []
    clean = {"PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": ""}
    with tempfile.TemporaryDirectory(prefix="fill-", dir=home) as tmp:
        scratch = Path(tmp)
        wheels = [w for w in absent if not w.sdist and not stored(home, w).is_file()]
        sdists = [w for w in absent if w.sdist and not stored(home, w).is_file()]
        pip_args = [*commands.pip_source(defn), *cert]
        base = [python, "-m", "pip", "download", "--isolated", "--disable-pip-version-check", "--no-deps",
                "--require-hashes", "--dest", str(scratch / "got"), *pip_args]
        if wheels:
            run([*base, *commands.pip_target(defn, arch), "-r", str(_requirements(scratch, wheels))], env=clean,
                what=f"pip download of {len(wheels)} locked wheels for {arch.name}")
        if sdists:
            (scratch / "s").mkdir()
            # pip reads a downloaded sdist's metadata by running its build backend: the pinned
            # one, as for the wheel built below (the file kept is the sdist, hash-checked)
            run([*base, "--no-binary=:all:", "--no-build-isolation", "-r", str(_requirements(scratch / "s", sdists))],
                env={**clean, "PYTHONPATH": str(backend(python, home, pip_args, clean))},
                what="pip download of locked source-only packages")
        for wheel in [*wheels, *sdists]:
            got = scratch / "got" / wheel.file
            if not got.is_file() or sha256_of(got) != wheel.sha256:
                raise RuntimeFailure(f"pip download left no {wheel.file} with sha256 {wheel.sha256[:12]} for "
                                     f"{wheel.name}=={wheel.version} ({lock.path})")
            target = stored(home, wheel)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(got, target)
        for wheel in (w for w in lock.entries if w.sdist and built(home, w) is None):
            out = scratch / "built" / wheel.sha256
            # a pure-Python sdist built natively: the wheel is the same for every arch
            made = build_wheel(python, stored(home, wheel), out, pip_args, clean,
                               backend=backend(python, home, pip_args, clean))
            if generator(made) != BACKEND_GENERATOR:
                raise RuntimeFailure(f"{made.name}, built from {wheel.file}, names {generator(made)!r} as its "
                                     f"generator; expected {BACKEND_GENERATOR!r}, the pinned build backend")
            final = home / BUILT / wheel.sha256
            final.parent.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(final, ignore_errors=True)
            os.replace(out, final)
    return len(absent)


# The zip entries' time of a wheel built from an sdist (bdist_wheel honours SOURCE_DATE_EPOCH;
# 1980-01-01, the earliest a zip can hold): the same sdist gives the same bytes on every
# rebuild, so the payload key, which hashes the wheel, holds when the wheelhouse rebuilds it.
BUILT_WHEEL_EPOCH = "315532800"


def backend(python: str, home: Path, pip_args: Sequence[str], env: Mapping[str, str]) -> Path:
    """The folder holding :data:`BACKEND`, installed hash-checked once per wheelhouse."""
    final = home / BACKENDS / BACKEND.sha256
    if (final / "setuptools" / "__init__.py").is_file():
        return final
    home.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="backend-", dir=home) as tmp:
        site = Path(tmp) / "site"
        run([python, "-m", "pip", "install", "--isolated", "--disable-pip-version-check", "--no-deps",
             "--require-hashes", "--no-compile", "--target", str(site), *pip_args,
             "-r", str(_requirements(Path(tmp), [BACKEND]))],
            env=env, what=f"pip install of the build backend {BACKEND.name}=={BACKEND.version}")
        final.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(site, final)
        except OSError:  # a folder there: another build's install, kept when whole, or a broken one
            if not (final / "setuptools" / "__init__.py").is_file():
                shutil.rmtree(final)
                os.replace(site, final)
    return final


def build_wheel(python: str, sdist: Path, out: Path, pip_args: Sequence[str], env: Mapping[str, str], *,
                backend: Path) -> Path:
    """``pip wheel`` of one stored sdist into ``out`` with the build backend in ``backend``
    (first on PYTHONPATH, pip's build isolation off), reproducibly (BUILT_WHEEL_EPOCH)."""
    # --no-cache-dir: never a wheel pip built before, under another SOURCE_DATE_EPOCH or none
    run([python, "-m", "pip", "wheel", "--isolated", "--disable-pip-version-check", "--no-deps", "--no-cache-dir",
         "--no-build-isolation", "--wheel-dir", str(out), *pip_args, str(sdist)],
        env={**env, "SOURCE_DATE_EPOCH": BUILT_WHEEL_EPOCH, "PYTHONPATH": str(backend)},
        what=f"pip wheel of {sdist.name}")
    found = sorted(out.glob("*.whl"))
    if len(found) != 1:
        raise RuntimeFailure(f"pip wheel of {sdist.name} left {len(found)} wheels in {out}; expected 1")
    return found[0]


def _link(source: Path, dest: Path) -> None:
    try:
        os.link(source, dest)
    except OSError:  # another filesystem: a copy
        shutil.copy2(source, dest)


def stage(lock: Lock, *, home: Path, context: Path, with_wheels: bool = True) -> Path:
    """``.cache/wheels/payload`` holding exactly the lock's files and the requirement lists the
    payload stage installs from (replaced whole: nothing of another image's lock stays).
    Without ``with_wheels``, all but the lock's wheels themselves: what the payload key reads
    (:func:`.payload.payload_key` hashes no locked wheel's bytes, only its lock line), so a
    payload image that exists is found without the wheels on disk."""
    if not any(w.name == "pip" and not w.sdist for w in lock.entries):
        raise InputError(f"{lock.path}: no pip wheel is locked; expected one (the payload stage installs the lock "
                         "with the lock's own pip): relock with `invoke lock`")
    dest = context / STAGE
    if dest.exists():
        shutil.rmtree(dest)
    (dest / BUILT).mkdir(parents=True)
    wheels = [w for w in lock.entries if not w.sdist]
    for wheel in wheels if with_wheels else ():
        _link(stored(home, wheel), dest / wheel.file)
    names = []
    for wheel in (w for w in lock.entries if w.sdist):
        made = built(home, wheel)
        if made is None:
            raise RuntimeFailure(f"the wheelhouse {home} holds no wheel built from {wheel.file}; run the build again")
        _link(made, dest / BUILT / made.name)
        names.append(f"{wheel.name}=={wheel.version}\n")
    (dest / LOCKED).write_text("".join(w.line + "\n" for w in wheels))
    (dest / BUILT / "built.txt").write_text("".join(names))
    return dest


def trim(home: Path, keep: set[str], min_free: int) -> int:
    """Only when the wheelhouse's filesystem has less than ``min_free`` bytes free: drop every
    stored file whose sha256 is not in ``keep``, what the builds still to come install. The
    number of files dropped. CI (which builds each payload once) calls it after each payload,
    so the cache never costs a full disk; with room to spare, it keeps everything and the
    next run downloads nothing. Wheels built from sdists stay (kilobytes): the payload key
    hashes them, and a wheel built again, however reproducibly, is one more chance of other
    bytes and every payload built anew."""
    if not (home / "sha256").is_dir() or shutil.disk_usage(home).free >= min_free:
        return 0
    dropped = 0
    for folder in sorted((home / "sha256").iterdir()):
        if folder.name not in keep:
            shutil.rmtree(folder)
            dropped += 1
    return dropped
