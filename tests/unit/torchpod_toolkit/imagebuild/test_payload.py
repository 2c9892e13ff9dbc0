"""torchpod_toolkit.imagebuild.payload, checked without an engine: the payload image's key follows every
input of the payload and nothing after it; a payload no image stands on is swept."""

from __future__ import annotations

import pytest

from torchpod import readers
from torchpod.arch import ARCHES
from torchpod.errors import InputError, RuntimeFailure
from torchpod_toolkit.imagebuild import commands, payload
from torchpod_toolkit.imagebuild.definitions import load_definitions

from paths import ROOT

DEFN = load_definitions(ROOT / "images")["pytorch"]
X86 = ARCHES["x86_64"]


def _staged(tmp_path, lines: str, built: bytes = b"wheel"):
    folder = tmp_path / "payload"
    (folder / "built").mkdir(parents=True, exist_ok=True)
    (folder / "locked.txt").write_text(lines)
    (folder / "built" / "built.txt").write_text("python-etcd==0.4.5\n")
    (folder / "built" / "python_etcd-0.4.5-py3-none-any.whl").write_bytes(built)
    (folder / "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"named by its hash in locked.txt")
    return folder


def test_the_payload_key_follows_every_input_of_the_payload_and_nothing_after_it(tmp_path):
    from torchpod_toolkit.imagebuild.commands import Builder

    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    argv = commands.build_command(Builder("docker", buildx=False), DEFN, X86, context=ROOT, tag="payload",
                                         base_image="b", build_base_image="b")
    staged = _staged(tmp_path, "torch==2.13.0 --hash=sha256:aa\n")
    key = payload.payload_key(argv, dockerfile, staged, ["sha256:1", "sha256:2"])
    assert key == payload.payload_key([*argv[:-1], "/elsewhere"], dockerfile, staged, ["sha256:1", "sha256:2"])
    # a fresh clone elsewhere (the Dockerfile's path, the context's) and a later commit (its
    # time, SOURCE_DATE_EPOCH) build the same payload
    elsewhere = commands.build_command(Builder("docker", buildx=False), DEFN, X86, context=ROOT / "x" / "y",
                                              tag="payload", base_image="b", build_base_image="b",
                                              source_date_epoch=1234)
    assert "SOURCE_DATE_EPOCH=1234" in elsewhere and str(ROOT / "x" / "y" / "docker" / "Dockerfile") in elsewhere
    assert payload.payload_key(elsewhere, dockerfile, staged, ["sha256:1", "sha256:2"]) == key
    retagged = list(argv)
    retagged[retagged.index("-t") + 1] = "torchpod-payload:x"
    assert payload.payload_key(retagged, dockerfile, staged, ["sha256:1", "sha256:2"]) == key  # the tag is no input
    after = dockerfile.replace("cp -R /mnt/. ${EXAMPLES_DIR}/", "cp -R /mnt/. ${EXAMPLES_DIR}/ ")
    assert after != dockerfile
    assert payload.payload_key(argv, after, staged, ["sha256:1", "sha256:2"]) == key  # a later stage: no new payload
    changed = {
        "a payload step": payload.payload_key(
            argv, dockerfile.replace("sh /srv/payload.sh /mnt", "sh /srv/payload.sh /mnt "), staged,
            ["sha256:1", "sha256:2"]),
        "a base": payload.payload_key(argv, dockerfile, staged, ["sha256:1", "sha256:3"]),
        "the payload script": payload.payload_key(argv, dockerfile, staged, ["sha256:1", "sha256:2"], b"echo"),
        "a build arg": payload.payload_key(
            commands.build_command(Builder("docker", buildx=False), DEFN, X86, context=ROOT, tag="payload",
                                          base_image="b", build_base_image="b", rebuild="token"),
            dockerfile, staged, ["sha256:1", "sha256:2"]),
        "a locked hash": payload.payload_key(
            argv, dockerfile, _staged(tmp_path / "l", "torch==2.13.0 --hash=sha256:ab\n"), ["sha256:1", "sha256:2"]),
        "a wheel built from an sdist": payload.payload_key(
            argv, dockerfile, _staged(tmp_path / "w", "torch==2.13.0 --hash=sha256:aa\n", b"other"),
            ["sha256:1", "sha256:2"]),
    }
    assert key not in changed.values() and len(set(changed.values())) == len(changed), changed
    with pytest.raises(RuntimeFailure, match="no line 'FROM \\$\\{PAYLOAD_IMAGE\\} AS runtime-base'"):
        payload.payload_key(argv, "FROM x AS runtime-base\n", staged, [])


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
    assert payload.drop_stale_payloads(SimpleNamespace(images=images)) == ["torchpod-payload:x86_64-old"]
    assert images.removed == ["torchpod-payload:x86_64-old"]


def test_the_payload_scripts_are_every_file_the_payload_stages_mount(tmp_path):
    # payload.sh and the shard helper it calls: an edit to either is a new payload
    folder = tmp_path / payload.PAYLOAD_DIR
    (folder / "__pycache__").mkdir(parents=True)
    (folder / "payload.sh").write_text("sh\n")
    (folder / "shards.py").write_text("py\n")
    (folder / "__pycache__" / "shards.cpython-311.pyc").write_bytes(b"compiled")
    first = payload.payload_scripts(tmp_path)
    assert b"payload.sh\0sh\n" in first and b"shards.py\0py\n" in first and b"compiled" not in first
    (folder / "shards.py").write_text("py 2\n")
    assert payload.payload_scripts(tmp_path) != first
    (folder / "shards.py").write_text("py\n")
    (folder / "payload.sh").rename(folder / "renamed.sh")
    assert payload.payload_scripts(tmp_path) != first  # a name is part of what is hashed
    real = payload.payload_scripts(ROOT)
    assert b"shards.py\0" in real and b"payload.sh\0" in real


def test_a_payload_input_over_its_cap_or_not_utf8_is_one_line(tmp_path):
    folder = tmp_path / payload.PAYLOAD_DIR
    folder.mkdir(parents=True)
    with open(folder / "payload.sh", "wb") as f:
        f.truncate(readers.DATA_CAP + 1)  # a sparse file past the cap: refused from its size
    with pytest.raises(InputError, match=r"payload.sh is 1048577 bytes, over the 1 MiB cap"):
        payload.payload_scripts(tmp_path)
    staged = _staged(tmp_path, "torch==2.13.0 --hash=sha256:aa\n")
    with open(staged / "locked.txt", "wb") as f:
        f.truncate(payload.STAGED_FILE_CAP + 1)
    with pytest.raises(InputError, match=r"locked.txt is \d+ bytes, over the 16 MiB cap"):
        payload.payload_key([], "FROM ${PAYLOAD_IMAGE} AS runtime-base\n", staged, [])
    (tmp_path / "docker" / "Dockerfile").write_bytes(b"FROM x\n\xff\n")
    with pytest.raises(InputError, match=r"Dockerfile holds bytes that are not UTF-8 text \(first at byte 7\)"):
        payload.payload_ref(None, [], tmp_path, [], X86, no_cache=True)
