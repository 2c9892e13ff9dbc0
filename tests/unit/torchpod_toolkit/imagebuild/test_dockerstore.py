"""The sweep of the engine's overlay2 store: only folders nothing refers to go; a reference
it cannot read as moby wrote it (a FIFO, a device, binary, over its cap) stops the sweep in
one line with nothing removed.

The tree below is laid out as moby 20.10 lays out /var/lib/docker (layer/filestore.go's
cache-id, mount-id and init-id files; BuildKit's bolt databases under buildkit/)."""

from __future__ import annotations

import os

import pytest

from torchpod_toolkit.imagebuild import dockerstore

IMAGE_LAYER = "3cd3ii60yn6qi6cl5i3zb5e5h"
PULLED_LAYER = "a" * 64
CONTAINER = "u1fss2i6euowk3wj9z7gcrzzv"
BUILD_SNAPSHOT = "kh7l598m9rv5tqhf1dx2fh4r0"
LEAKED = ("17qcgnce88g2barbybt734ykz", "jmte5ck49uiqbqht0dy9uxie1")


def layer(root, name, short, payload=b"x" * 1000, lower=()):
    folder = root / "overlay2" / name
    (folder / "diff" / "opt").mkdir(parents=True)
    (folder / "diff" / "opt" / "file").write_bytes(payload)
    (folder / "link").write_text(short)
    if lower:
        (folder / "lower").write_text(":".join(f"l/{s}" for s in lower))
    (root / "overlay2" / "l").mkdir(exist_ok=True)
    (root / "overlay2" / "l" / short).symlink_to(f"../{name}/diff")
    return folder


@pytest.fixture
def root(tmp_path):
    db = tmp_path / "image" / "overlay2" / "layerdb"
    (db / "sha256" / "chain1").mkdir(parents=True)
    (db / "sha256" / "chain1" / "cache-id").write_text(IMAGE_LAYER)  # no newline, as moby writes it
    (db / "sha256" / "chain2").mkdir()
    (db / "sha256" / "chain2" / "cache-id").write_text(PULLED_LAYER)
    (db / "mounts" / "c0ffee").mkdir(parents=True)
    (db / "mounts" / "c0ffee" / "mount-id").write_text(CONTAINER)
    (db / "mounts" / "c0ffee" / "init-id").write_text(CONTAINER + "-init")
    (tmp_path / "buildkit").mkdir()
    (tmp_path / "buildkit" / "snapshots.db").write_bytes(b"\x00\x01bucket" + BUILD_SNAPSHOT.encode() + b"\x00id")
    for i, name in enumerate((IMAGE_LAYER, PULLED_LAYER, CONTAINER, CONTAINER + "-init", BUILD_SNAPSHOT, *LEAKED)):
        layer(tmp_path, name, f"SHORT{i:021d}")
    return tmp_path


def test_only_the_folders_nothing_refers_to_are_removed_with_their_links(root):
    result = dockerstore.sweep(root)
    assert sorted(result.removed) == sorted(LEAKED)
    assert result.freed_bytes >= 2000
    left = sorted(p.name for p in (root / "overlay2").iterdir())
    assert left == sorted([IMAGE_LAYER, PULLED_LAYER, CONTAINER, CONTAINER + "-init", BUILD_SNAPSHOT, "l"])
    links = {p.name for p in (root / "overlay2" / "l").iterdir()}
    assert len(links) == 5 and all((root / "overlay2" / "l" / short).exists() for short in links)
    assert dockerstore.sweep(root).removed == ()  # a second sweep finds nothing


def test_a_folder_the_driver_did_not_name_is_never_touched(root):
    for odd in ("notes", "UPPERCASE1234567890123456789", "short1"):
        (root / "overlay2" / odd).mkdir()
    (root / "overlay2" / ("b" * 25)).symlink_to(root / "overlay2" / IMAGE_LAYER)
    dockerstore.sweep(root)
    for odd in ("notes", "UPPERCASE1234567890123456789", "short1", "b" * 25):
        assert (root / "overlay2" / odd).exists()
    assert (root / "overlay2" / IMAGE_LAYER / "diff" / "opt" / "file").exists()


def test_a_link_file_naming_a_path_removes_no_link_outside_l(root):
    victim = root / "victim"
    victim.write_text("keep")
    (root / "overlay2" / LEAKED[0] / "link").write_text("../../victim")
    dockerstore.sweep(root)
    assert victim.read_text() == "keep"


def test_not_a_docker_root_is_refused_in_one_line(tmp_path, capsys):
    (tmp_path / "overlay2" / LEAKED[0]).mkdir(parents=True)
    assert dockerstore.main([str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "not swept" in err and "layerdb" in err
    assert (tmp_path / "overlay2" / LEAKED[0]).is_dir()


def test_a_root_without_overlay2_has_nothing_to_sweep(tmp_path):
    assert dockerstore.main([str(tmp_path)]) == 0


def test_usage_takes_at_most_one_root(capsys):
    assert dockerstore.main(["a", "b"]) == 2
    assert "usage" in capsys.readouterr().err


@pytest.mark.parametrize("text, expected", [
    ('{"data-root": "/srv/docker"}', "/srv/docker"),
    ("{}", "/var/lib/docker"),
    ('{"data-root": "relative"}', "/var/lib/docker"),
    ('{"data-root": 7}', "/var/lib/docker"),
    ("[1, 2]", "/var/lib/docker"),
    ("not json", "/var/lib/docker"),
])
def test_the_data_root_is_read_from_the_engines_configuration(tmp_path, text, expected):
    config = tmp_path / "daemon.json"
    config.write_text(text)
    assert str(dockerstore.data_root(config)) == expected


def test_a_kept_layer_keeps_the_snapshots_it_stands_on_that_no_layer_store_entry_names(root):
    # a payload layer BuildKit made and the layer store took over (its cache-id names it)
    # stands on BuildKit's snapshot of the empty layer, which stands on another snapshot:
    # neither is named by any cache-id, and mounting the payload needs both
    layer(root, "p" * 25, "SHORTBASE000000000000000000")
    layer(root, "e" * 25, "SHORTEMPTY00000000000000000", payload=b"", lower=["SHORTBASE000000000000000000"])
    layer(root, "q" * 25, "SHORTPAYLOAD000000000000000",
          lower=["SHORTEMPTY00000000000000000", "SHORTBASE000000000000000000"])
    (root / "image" / "overlay2" / "layerdb" / "sha256" / "chain3").mkdir()
    (root / "image" / "overlay2" / "layerdb" / "sha256" / "chain3" / "cache-id").write_text("q" * 25)
    result = dockerstore.sweep(root)
    assert sorted(result.removed) == sorted(LEAKED)
    for name in ("p" * 25, "e" * 25, "q" * 25):
        assert (root / "overlay2" / name / "diff").is_dir()
    for short in ("SHORTBASE000000000000000000", "SHORTEMPTY00000000000000000"):
        assert (root / "overlay2" / "l" / short).resolve().is_dir()


def test_an_orphan_naming_a_kept_layers_link_leaves_that_link(root):
    kept_short = (root / "overlay2" / IMAGE_LAYER / "link").read_text()
    (root / "overlay2" / LEAKED[0] / "link").write_text(kept_short)
    dockerstore.sweep(root)
    assert (root / "overlay2" / "l" / kept_short).resolve() == (root / "overlay2" / IMAGE_LAYER / "diff").resolve()


def _fifo(path):
    path.unlink()
    os.mkfifo(path)


def _device(path):
    path.unlink()
    path.symlink_to("/dev/zero")


def _binary(path):
    path.write_bytes(b"\xff\xfe" * 8)


def _huge(path):
    path.write_bytes(b"x" * (dockerstore._LOWER_CAP + 1))


NAMES = ("image/overlay2/layerdb/mounts/c0ffee/mount-id", f"overlay2/{LEAKED[0]}/link")


# a bolt database is bytes of any value, far larger than a name: only what is not a file stops it
@pytest.mark.parametrize("where, spoil, said", [
    *((w, s, said) for w in NAMES for s, said in ((_fifo, "is a FIFO"), (_device, "expected a regular file"),
                                                  (_binary, "not UTF-8"), (_huge, "cap"))),
    ("buildkit/snapshots.db", _fifo, "is a FIFO"), ("buildkit/snapshots.db", _device, "expected a regular file"),
])
def test_a_reference_it_cannot_read_stops_the_sweep_with_nothing_removed(root, capsys, where, spoil, said):
    before = sorted(p.name for p in (root / "overlay2").iterdir())
    spoil(root / where)
    assert dockerstore.main([str(root)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "not swept" in err and where.split("/")[-1] in err and said in err, err
    assert sorted(p.name for p in (root / "overlay2").iterdir()) == before

