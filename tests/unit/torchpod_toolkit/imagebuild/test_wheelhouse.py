"""torchpod_toolkit.imagebuild.wheelhouse: content-addressed storage, staging exactly a lock's files, and
--offline naming the first file the wheelhouse lacks (no pip, no network: a store made here)."""

from __future__ import annotations

import hashlib
import os
import tracemalloc
import zipfile
from pathlib import Path

import pytest

from torchpod.arch import ARCHES
from torchpod.errors import InputError
from torchpod_toolkit.imagebuild import locks, wheelhouse
from torchpod_toolkit.imagebuild.definitions import load_definitions

from paths import ROOT

DEFN = load_definitions(ROOT / "images")["pytorch"]
X86 = ARCHES["x86_64"]


def _store(home: Path, name: str, body: bytes, file: str) -> locks.Wheel:
    wheel = locks.Wheel(name, "1.0", hashlib.sha256(body).hexdigest(), file)
    path = wheelhouse.stored(home, wheel)
    path.parent.mkdir(parents=True)
    path.write_bytes(body)
    return wheel


def _lock(*entries) -> locks.Lock:
    return locks.Lock(Path("images/locks/pytorch-x86_64.txt"), "pytorch", "x86_64", "x", tuple(entries))


def _stored_lock(home: Path) -> tuple[locks.Wheel, locks.Wheel, locks.Wheel, Path]:
    """A wheel, pip's wheel and an sdist stored, with the wheel built from the sdist."""
    a = _store(home, "a", b"wheel a", "a-1.0-py3-none-any.whl")
    pip = _store(home, "pip", b"wheel pip", "pip-26.3-py3-none-any.whl")
    sdist = _store(home, "s", b"sdist s", "s-1.0.tar.gz")
    built = home / wheelhouse.BUILT / sdist.sha256 / "s-1.0-py3-none-any.whl"
    built.parent.mkdir(parents=True)
    _wheel(built, {"s-1.0.dist-info/WHEEL": PINNED})
    return a, pip, sdist, built


def test_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHPOD_WHEELHOUSE", str(tmp_path / "w"))
    assert wheelhouse.root() == tmp_path / "w"
    monkeypatch.delenv("TORCHPOD_WHEELHOUSE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "c"))
    assert wheelhouse.root() == tmp_path / "c" / "torchpod" / "wheelhouse"


def test_stage_holds_exactly_the_locks_files_linked_not_copied(tmp_path):
    home, context = tmp_path / "home", tmp_path / "ctx"
    a, pip, sdist, built = _stored_lock(home)
    lock = _lock(a, pip, sdist)
    assert wheelhouse.missing(home, lock) == []
    (context / wheelhouse.STAGE).mkdir(parents=True)
    (context / wheelhouse.STAGE / "other-image.whl").write_bytes(b"stale")
    dest = wheelhouse.stage(lock, home=home, context=context)
    assert sorted(p.name for p in dest.iterdir()) == sorted([wheelhouse.BUILT, a.file, pip.file, wheelhouse.LOCKED])
    assert os.stat(dest / a.file).st_ino == os.stat(wheelhouse.stored(home, a)).st_ino
    assert (dest / wheelhouse.LOCKED).read_text() == a.line + "\n" + pip.line + "\n"
    assert (dest / wheelhouse.BUILT / "built.txt").read_text() == "s==1.0\n"
    assert (dest / wheelhouse.BUILT / built.name).read_bytes() == built.read_bytes()


def test_offline_names_the_first_missing_file_and_fetches_nothing(tmp_path):
    home = tmp_path / "home"
    a = _store(home, "a", b"wheel a", "a-1.0-py3-none-any.whl")
    gone = locks.Wheel("numpy", "2.4.6", "d" * 64, "numpy-2.4.6-cp311-cp311-manylinux_2_28_x86_64.whl")
    lock = _lock(a, gone)
    assert wheelhouse.missing(home, lock) == [gone]
    with pytest.raises(InputError) as info:
        wheelhouse.fill(DEFN, X86, lock, home=home, ca_bundle=None, offline=True)
    message = str(info.value)
    assert message.startswith(f"--offline: {gone.file} (numpy==2.4.6, sha256 dddddddddddd) is not in the wheelhouse")
    assert "invoke wheels --image pytorch --arch x86_64" in message
    # a full wheelhouse fetches nothing, online or not (no pip runs)
    assert wheelhouse.fill(DEFN, X86, _lock(a), home=home, ca_bundle=None, offline=False, python="/nonexistent") == 0


def test_offline_says_a_stored_sdist_lacks_only_its_wheel_from_the_pinned_backend(tmp_path):
    home = tmp_path / "home"
    a, pip, sdist, built = _stored_lock(home)
    _wheel(built, {"s-1.0.dist-info/WHEEL": PINNED.replace("82.0.1", "84.2.1")})  # built before the pin
    with pytest.raises(InputError) as info:
        wheelhouse.fill(DEFN, X86, _lock(a, pip, sdist), home=home, ca_bundle=None, offline=True)
    assert str(info.value).startswith(f"--offline: a wheel built by {wheelhouse.BACKEND_GENERATOR} from s-1.0.tar.gz "
                                      "(s==1.0, sha256 ")


def _fake_pip_install(into_final: bool, home: Path):
    """Stands in for pip's ``install --target``: writes a setuptools tree there and, with
    ``into_final``, another build's whole install first (two first builds at once)."""
    def run(argv, **_):
        target = Path(argv[argv.index("--target") + 1])
        (target / "setuptools").mkdir(parents=True)
        (target / "setuptools" / "__init__.py").write_text("# this build\n")
        if into_final:
            final = home / wheelhouse.BACKENDS / wheelhouse.BACKEND.sha256
            (final / "setuptools").mkdir(parents=True)
            (final / "setuptools" / "__init__.py").write_text("# the other build\n")
    return run


@pytest.mark.parametrize("other, kept", [(True, "# the other build\n"), (False, "# this build\n")])
def test_a_backend_another_build_installed_meanwhile_is_kept_and_a_broken_one_replaced(tmp_path, monkeypatch,
                                                                                     other, kept):
    home = tmp_path / "home"
    final = home / wheelhouse.BACKENDS / wheelhouse.BACKEND.sha256
    if not other:
        (final / "setuptools").mkdir(parents=True)  # a broken install: no __init__.py
        (final / "stale").write_text("")
    monkeypatch.setattr(wheelhouse, "run", _fake_pip_install(other, home))
    assert wheelhouse.backend("python3", home, [], {}) == final
    assert (final / "setuptools" / "__init__.py").read_text() == kept and not (final / "stale").exists()
    assert [p.name for p in home.iterdir()] == [wheelhouse.BACKENDS]  # no scratch folder left


def test_an_sdist_without_its_built_wheel_counts_as_missing(tmp_path):
    home = tmp_path / "home"
    sdist = _store(home, "s", b"sdist", "s-1.0.tar.gz")
    assert wheelhouse.missing(home, _lock(sdist)) == [sdist]


def test_trim_drops_only_downloads_no_later_build_needs_and_only_when_the_disk_is_low(tmp_path):
    home = tmp_path / "home"
    a = _store(home, "a", b"wheel a", "a-1.0-py3-none-any.whl")
    b = _store(home, "b", b"wheel b", "b-1.0-py3-none-any.whl")
    sdist = _store(home, "s", b"sdist", "s-1.0.tar.gz")
    (home / wheelhouse.BUILT / sdist.sha256).mkdir(parents=True)
    assert wheelhouse.trim(home, {a.sha256}, min_free=0) == 0  # room to spare: nothing dropped
    assert wheelhouse.missing(home, _lock(a, b)) == []
    assert wheelhouse.trim(home, {a.sha256}, min_free=1 << 62) == 2  # "low": b and the sdist go
    assert wheelhouse.stored(home, a).is_file() and not wheelhouse.stored(home, b).exists()
    assert (home / wheelhouse.BUILT / sdist.sha256).is_dir()  # a built wheel stays: the payload key hashes it
    assert wheelhouse.trim(tmp_path / "empty", set(), min_free=1 << 62) == 0


def test_a_lock_without_pip_is_refused_before_anything_is_staged(tmp_path):
    # the payload stage installs the lock with the lock's own pip, run from its wheel
    home, context = tmp_path / "home", tmp_path / "ctx"
    lock = _lock(_store(home, "a", b"wheel a", "a-1.0-py3-none-any.whl"))
    with pytest.raises(InputError, match=r"no pip wheel is locked; expected one .*`invoke lock`"):
        wheelhouse.stage(lock, home=home, context=context)
    assert not (context / wheelhouse.STAGE).exists()


def test_staged_without_wheels_the_payload_key_is_the_same_and_no_wheel_is_needed(tmp_path):
    from torchpod_toolkit.imagebuild import payload

    home, context = tmp_path / "home", tmp_path / "ctx"
    a, pip, sdist, built = _stored_lock(home)
    lock = _lock(a, pip, sdist)

    def key() -> str:
        dockerfile = "x\n" + payload._PAYLOAD_END
        return payload.payload_key(["--target", "runtime-payload"], dockerfile, context / wheelhouse.STAGE, ["b"])

    wheelhouse.stage(lock, home=home, context=context)
    full = key()
    wheelhouse.stored(home, a).unlink()  # a trimmed wheelhouse: the big wheels gone
    lines_only = wheelhouse.stage(lock, home=home, context=context, with_wheels=False)
    assert key() == full
    assert sorted(p.name for p in lines_only.iterdir()) == sorted([wheelhouse.BUILT, wheelhouse.LOCKED])
    # a locked line that changes still moves the key
    other = locks.Wheel("a", "1.1", "e" * 64, "a-1.1-py3-none-any.whl")
    wheelhouse.stage(_lock(other, pip, sdist), home=home, context=context, with_wheels=False)
    assert key() != full


def test_sources_only_fetches_no_locked_wheel(tmp_path):
    home = tmp_path / "home"
    gone = locks.Wheel("numpy", "2.4.6", "d" * 64, "numpy-2.4.6-cp311-cp311-manylinux_2_28_x86_64.whl")
    # only the wheel is absent: nothing to fetch (pip would fail: it does not exist), even --offline
    assert wheelhouse.fill(DEFN, X86, _lock(gone), home=home, ca_bundle=None, offline=True, sources_only=True) == 0
    sdist = locks.Wheel("s", "1.0", "f" * 64, "s-1.0.tar.gz")
    with pytest.raises(InputError, match=r"--offline: s-1.0.tar.gz"):
        wheelhouse.fill(DEFN, X86, _lock(gone, sdist), home=home, ca_bundle=None, offline=True, sources_only=True)



def _wheel(path: Path, files: dict[str, str | bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as whl:
        for name, body in files.items():
            whl.writestr(name, body)
    return path


PINNED = f"Wheel-Version: 1.0\nGenerator: {wheelhouse.BACKEND_GENERATOR}\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


@pytest.mark.parametrize("files, expected", [
    ({"x-1.dist-info/WHEEL": PINNED}, wheelhouse.BACKEND_GENERATOR),
    ({"x-1.dist-info/WHEEL": PINNED.replace("82.0.1", "84.2.1")}, "setuptools (84.2.1)"),
    ({"x/__init__.py": ""}, None),  # no WHEEL file
    ({"x-1.dist-info/WHEEL": PINNED, "y-1.dist-info/WHEEL": PINNED}, None),  # two
    ({"deep/x-1.dist-info/WHEEL": PINNED}, None),  # not at the top
    ({"x-1.dist-info/WHEEL": "Wheel-Version: 1.0\n"}, None),  # no Generator line
    ({"x-1.dist-info/WHEEL": PINNED + "Generator: other (1)\n"}, None),  # two Generator lines
])
def test_a_wheels_generator_is_read_from_its_one_wheel_file(tmp_path, files, expected):
    assert wheelhouse.generator(_wheel(tmp_path / "x-1-py3-none-any.whl", files)) == expected


def test_a_generator_that_is_not_utf8_is_read_and_is_not_the_pin(tmp_path):
    wheel = _wheel(tmp_path / "x.whl", {"x-1.dist-info/WHEEL": b"Generator: setuptools (82.0.1\xff)\n"})
    assert wheelhouse.generator(wheel) == "setuptools (82.0.1\ufffd)" != wheelhouse.BACKEND_GENERATOR


def test_a_file_that_is_no_zip_has_no_generator(tmp_path):
    (tmp_path / "x.whl").write_bytes(b"not a zip")
    assert wheelhouse.generator(tmp_path / "x.whl") is None
    assert wheelhouse.generator(tmp_path / "absent.whl") is None
    os.mkfifo(tmp_path / "fifo.whl")  # never opened for reading: it would wait for a writer
    assert wheelhouse.generator(tmp_path / "fifo.whl") is None
    (tmp_path / "dir.whl").mkdir()
    assert wheelhouse.generator(tmp_path / "dir.whl") is None


def test_a_wheel_file_over_its_cap_has_no_generator_and_is_never_inflated_whole(tmp_path):
    body = PINNED + "#" * wheelhouse.WHEEL_FILE_CAP
    assert wheelhouse.generator(_wheel(tmp_path / "big.whl", {"x-1.dist-info/WHEEL": body})) is None
    at_cap = PINNED + "#" * (wheelhouse.WHEEL_FILE_CAP - len(PINNED))
    assert wheelhouse.generator(_wheel(tmp_path / "cap.whl", {"x-1.dist-info/WHEEL": at_cap})) \
        == wheelhouse.BACKEND_GENERATOR
    bomb = tmp_path / "bomb.whl"  # 64 MiB of zeros that deflate to about 64 KiB
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as whl, whl.open("x-1.dist-info/WHEEL", "w") as member:
        for _ in range(64):
            member.write(bytes(1 << 20))
    tracemalloc.start()
    try:
        assert wheelhouse.generator(bomb) is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak


def test_a_wheel_another_backend_built_is_built_again(tmp_path):
    sdist = _store(tmp_path, "tiny", b"sdist", "tiny-1.0.tar.gz")
    folder = tmp_path / wheelhouse.BUILT / sdist.sha256
    folder.mkdir(parents=True)
    wheel = folder / "tiny-1.0-py3-none-any.whl"
    _wheel(wheel, {"tiny-1.0.dist-info/WHEEL": PINNED.replace("82.0.1", "84.2.1")})
    lock = _lock(sdist)
    assert wheelhouse.built(tmp_path, sdist) is None and wheelhouse.missing(tmp_path, lock) == [sdist]
    _wheel(wheel, {"tiny-1.0.dist-info/WHEEL": PINNED})
    assert wheelhouse.built(tmp_path, sdist) == wheel and wheelhouse.missing(tmp_path, lock) == []

