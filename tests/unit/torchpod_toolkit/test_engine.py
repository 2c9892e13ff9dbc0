"""torchpod_toolkit.engine, checked without an engine: a foreign arch without emulation is one
clear line; the probe's result is remembered per lock, base and probe source."""

from __future__ import annotations

import pytest

from torchpod.arch import ARCHES
from torchpod.errors import InputError
from torchpod_toolkit import engine
from torchpod_toolkit.definitions import load_definitions
from torchpod_toolkit.engine import check_emulation

from paths import ROOT

DEFN = load_definitions(ROOT / "images")["pytorch"]
ARM, X86 = ARCHES["aarch64"], ARCHES["x86_64"]


def test_emulation_missing_is_one_clear_line(tmp_path):
    check_emulation(X86, X86, tmp_path)  # native: nothing needed
    with pytest.raises(InputError, match="needs QEMU user emulation.*qemu-user-static"):
        check_emulation(ARM, X86, tmp_path)
    (tmp_path / "qemu-aarch64").write_text("enabled\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\n")
    check_emulation(ARM, X86, tmp_path)


def test_the_probe_is_remembered_per_lock_base_and_probe_source(tmp_path):
    from dataclasses import replace

    from torchpod_toolkit import locks

    defn = DEFN
    arch = defn.arch("x86_64")
    wheels = locks.load(ROOT / "images", defn, arch, debian=False)
    debs = locks.load(ROOT / "images", defn, arch, debian=True)
    inputs = engine.Inputs(wheels, debs, "{}")
    key = engine.probe_key(inputs, "sha256:base1", arch)
    assert key == engine.probe_key(inputs, "sha256:base1", arch)
    arm = defn.arch("aarch64")
    other_lock = replace(inputs, wheels=locks.load(ROOT / "images", defn, arm, debian=False))
    assert len({key, engine.probe_key(inputs, "sha256:base2", arch), engine.probe_key(other_lock, "sha256:base1", arch),
                engine.probe_key(inputs, "sha256:base1", arm)}) == 4
    # a remembered result is returned without an engine (client None would fail if used)
    (tmp_path / "probes").mkdir()
    (tmp_path / "probes" / f"{key}.json").write_text('{"torch": "2.13.0+cu130", "machine": "x86_64"}')
    assert engine.cached_probe(None, "ref", arch, tmp_path, key) == {"torch": "2.13.0+cu130", "machine": "x86_64"}
    # a damaged entry is not trusted: the probe runs (and here fails on the missing engine)
    (tmp_path / "probes" / f"{key}.json").write_text('{"torch": 2}')
    with pytest.raises(AttributeError):
        engine.cached_probe(None, "ref", arch, tmp_path, key)


def test_a_changed_wheel_base_package_or_apt_layer_package_changes_the_probes_key():
    from dataclasses import replace

    from torchpod_toolkit import locks

    defs = load_definitions(ROOT / "images")
    arch = defs["pytorch"].arch("x86_64")

    def inputs(name):
        defn = defs[name]
        return engine.Inputs(locks.load(ROOT / "images", defn, arch, debian=False),
                             locks.load(ROOT / "images", defn, arch, debian=True), "{}")

    plain, efa = inputs("pytorch"), inputs("pytorch-efa")
    # a variant's libfabric (its apt layer) is read by the probe: its result is its own
    assert engine.probe_key(efa, "sha256:b", arch) != engine.probe_key(plain, "sha256:b", arch)
    first = plain.wheels.entries[0]
    bumped = replace(plain, wheels=replace(plain.wheels, entries=(replace(first, sha256="0" * 64),
                                                                  *plain.wheels.entries[1:])))
    assert engine.probe_key(bumped, "sha256:b", arch) != engine.probe_key(plain, "sha256:b", arch)
    base = [d for d in plain.debs.entries if d.layer == "base"][0]
    moved = replace(plain, debs=replace(plain.debs, entries=tuple(replace(d, version=d.version + "+1") if d is base
                                                                  else d for d in plain.debs.entries)))
    assert engine.probe_key(moved, "sha256:b", arch) != engine.probe_key(plain, "sha256:b", arch)
    # the lock file's header (its image name, its path) is no input: the same lines, the same key
    renamed = replace(plain, wheels=replace(plain.wheels, image="other", path=ROOT / "elsewhere.txt"))
    assert engine.probe_key(renamed, "sha256:b", arch) == engine.probe_key(plain, "sha256:b", arch)


def _staged(tmp_path, lines: str, built: bytes = b"wheel"):
    folder = tmp_path / "payload"
    (folder / "built").mkdir(parents=True, exist_ok=True)
    (folder / "locked.txt").write_text(lines)
    (folder / "built" / "built.txt").write_text("python-etcd==0.4.5\n")
    (folder / "built" / "python_etcd-0.4.5-py3-none-any.whl").write_bytes(built)
    (folder / "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"named by its hash in locked.txt")
    return folder


def test_the_payload_key_follows_every_input_of_the_payload_and_nothing_after_it(tmp_path):
    from torchpod_toolkit.commands import Builder

    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    argv = engine.commands.build_command(Builder("docker", buildx=False), DEFN, X86, context=ROOT, tag="payload",
                                         base_image="b", build_base_image="b")
    staged = _staged(tmp_path, "torch==2.13.0 --hash=sha256:aa\n")
    key = engine.payload_key(argv, dockerfile, staged, ["sha256:1", "sha256:2"])
    assert key == engine.payload_key([*argv[:-1], "/elsewhere"], dockerfile, staged, ["sha256:1", "sha256:2"])
    # a fresh clone elsewhere (the Dockerfile's path, the context's) and a later commit (its
    # time, SOURCE_DATE_EPOCH) build the same payload
    elsewhere = engine.commands.build_command(Builder("docker", buildx=False), DEFN, X86, context=ROOT / "x" / "y",
                                              tag="payload", base_image="b", build_base_image="b",
                                              source_date_epoch=1234)
    assert "SOURCE_DATE_EPOCH=1234" in elsewhere and str(ROOT / "x" / "y" / "docker" / "Dockerfile") in elsewhere
    assert engine.payload_key(elsewhere, dockerfile, staged, ["sha256:1", "sha256:2"]) == key
    retagged = list(argv)
    retagged[retagged.index("-t") + 1] = "torchpod-payload:x"
    assert engine.payload_key(retagged, dockerfile, staged, ["sha256:1", "sha256:2"]) == key  # the tag is no input
    after = dockerfile.replace("cp -R /mnt/. ${EXAMPLES_DIR}/", "cp -R /mnt/. ${EXAMPLES_DIR}/ ")
    assert after != dockerfile
    assert engine.payload_key(argv, after, staged, ["sha256:1", "sha256:2"]) == key  # a later stage: no new payload
    changed = {
        "a payload step": engine.payload_key(
            argv, dockerfile.replace("sh /srv/payload.sh /mnt", "sh /srv/payload.sh /mnt "), staged,
            ["sha256:1", "sha256:2"]),
        "a base": engine.payload_key(argv, dockerfile, staged, ["sha256:1", "sha256:3"]),
        "the payload script": engine.payload_key(argv, dockerfile, staged, ["sha256:1", "sha256:2"], b"echo"),
        "a build arg": engine.payload_key(
            engine.commands.build_command(Builder("docker", buildx=False), DEFN, X86, context=ROOT, tag="payload",
                                          base_image="b", build_base_image="b", rebuild="token"),
            dockerfile, staged, ["sha256:1", "sha256:2"]),
        "a locked hash": engine.payload_key(
            argv, dockerfile, _staged(tmp_path / "l", "torch==2.13.0 --hash=sha256:ab\n"), ["sha256:1", "sha256:2"]),
        "a wheel built from an sdist": engine.payload_key(
            argv, dockerfile, _staged(tmp_path / "w", "torch==2.13.0 --hash=sha256:aa\n", b"other"),
            ["sha256:1", "sha256:2"]),
    }
    assert key not in changed.values() and len(set(changed.values())) == len(changed), changed
    with pytest.raises(engine.RuntimeFailure, match="no line 'FROM \\$\\{PAYLOAD_IMAGE\\} AS runtime-base'"):
        engine.payload_key(argv, "FROM x AS runtime-base\n", staged, [])


def test_buildkits_export_time_is_read_from_its_plain_progress_and_nothing_else_counts():
    log = [
        "#8 [payload 3/3] RUN --mount=type=bind,source=.cache/wheels/payload,target=/wheels set -euf\n",
        "#8 DONE 47.7s\n",
        "#14 exporting to image\n",
        "#14 sha256:e8c613e07b0b\n",
        "#14 exporting layers 21.7s done\n",
        "#14 DONE 21.7s\n",
        "#15 exporting to image\n",
        "#15 DONE 0.3s\n",
        "#16 [runtime 1/1] RUN echo '#14 DONE 99.0s'\n",
        "#16 DONE 0.2s\n",
    ]
    assert engine.export_seconds(log) == pytest.approx(22.0)
    assert engine.export_seconds([]) == 0.0
    assert engine.export_seconds(["#3 DONE 5.0s\n", "exporting to image\n", "#x DONE 1s\n"]) == 0.0


def test_the_phase_table_has_a_column_per_phase_and_a_row_per_build():
    result = engine.BuildResult(DEFN, X86, "t", 1, {}, 12.5, {"wheels": 1.0, "payload": 9.25})
    lines = engine.phase_table([result, engine.BuildResult(DEFN, ARM, "t", 1, {}, 3.0, {})]).splitlines()
    assert lines[0].split() == ["image", "arch", *engine.PHASES, "total"]
    assert lines[2].split() == ["pytorch", "x86_64", "1.0", "0.0", "0.0", "9.2", "0.0", "0.0", "0.0", "0.0", "12.5"]
    assert lines[3].split()[:2] == ["pytorch", "aarch64"] and lines[3].split()[-1] == "3.0"


def test_a_builds_export_is_its_own_phase_and_leaves_the_build_phase_it_came_from():
    clock = engine.Clock()
    clock.add("payload", 60.0)
    clock.add("layers", 5.0)
    clock.add("wheels", 3.0)
    clock.add("wheels", 1.5)  # a phase met twice adds up
    phases = clock.phases({"payload": 20.0, "layers": 1.0})
    assert list(phases) == list(engine.PHASES)
    assert (phases["payload"], phases["layers"], phases["export"], phases["wheels"], phases["probe"]) == \
        (40.0, 4.0, 21.0, 4.5, 0.0)
    assert engine.Clock().phases({"payload": 3.0})["payload"] == 0.0  # never below nothing


class _Image:
    def __init__(self, tags, layers):
        self.tags, self.attrs = tags, {"RootFS": {"Layers": layers}}


class _Images:
    def __init__(self, images):
        self.images, self.removed = images, []

    def list(self, name=None):
        return [i for i in self.images if name is None or any(t.startswith(name + ":") for t in i.tags)]

    def remove(self, tag):
        self.removed.append(tag)


def test_a_payload_no_image_stands_on_is_removed_and_one_an_image_still_uses_is_kept():
    from types import SimpleNamespace

    images = _Images([
        _Image(["torchpod/pytorch:2-x86_64"], ["base", "payload-new", "launcher"]),
        _Image(["torchpod/pytorch-newest:3-aarch64"], ["base-arm", "payload-arm-old", "launcher"]),
        _Image(["torchpod-payload:x86_64-new"], ["base", "payload-new"]),
        _Image(["torchpod-payload:x86_64-old"], ["base", "payload-old"]),  # its image was rebuilt
        _Image(["torchpod-payload:aarch64-old"], ["base-arm", "payload-arm-old"]),  # not rebuilt yet
    ])
    assert engine.drop_stale_payloads(SimpleNamespace(images=images)) == ["torchpod-payload:x86_64-old"]
    assert images.removed == ["torchpod-payload:x86_64-old"]
