"""tests/layer_scan.py: every layer searched once, through overlay2's directories or `docker save`;
a needle across two chunks, in a name or a link target is found; a clean layer is remembered."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile

import layer_scan as ls


def _diff(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class _Image:
    """What the scan reads of a docker SDK image: its layers and `save()`."""

    def __init__(self, members: dict[str, bytes], layers: list[bytes]):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as archive:
            for name, data in members.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
        self._bytes = buf.getvalue()
        self.attrs = {"RootFS": {"Layers": [_diff(layer) for layer in layers]}}
        self.saves = 0

    def save(self, chunk_size):
        self.saves += 1
        return [self._bytes[i:i + 777] for i in range(0, len(self._bytes), 777)]


def test_a_needle_is_found_across_chunks_and_only_whole():
    assert ls.found_in([b"abcXY", b"Zdef"], [b"XYZ"])
    assert ls.found_in([b"a", b"b", b"c"], [b"abc"])
    assert not ls.found_in([b"abcX", b"Ydef"], [b"XYZ"])


def test_the_chain_ids_follow_the_image_spec():
    a, b = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    assert ls.chain_ids([a, b]) == [a, "sha256:" + hashlib.sha256(f"{a} {b}".encode()).hexdigest()]


def test_save_is_read_once_and_a_clean_layer_never_again(tmp_path):
    clean, dirty = b"clean" * 1000, b"a NEEDLE in here"
    image = _Image({"l1/layer.tar": clean, "l2/layer.tar": dirty, "manifest.json": b"{}"}, [clean, dirty])
    scanned = ls.Scanned(tmp_path, [b"NEEDLE"])
    assert ls.dirty_layers(image, {"Driver": "vfs"}, scanned) == ([_diff(dirty)], 2)
    assert scanned.clean(_diff(clean)) and not scanned.clean(_diff(dirty))
    assert ls.dirty_layers(image, {"Driver": "vfs"}, scanned) == ([_diff(dirty)], 1)  # the dirty one again
    assert image.saves == 2
    # other needles, another memory: nothing is taken as clean for them
    assert ls.dirty_layers(image, {"Driver": "vfs"}, ls.Scanned(tmp_path, [b"other"])) == ([], 2)


def test_overlay2_directories_are_read_layer_by_layer_names_and_link_targets_too(tmp_path):
    layers = [b"base", b"payload", b"launcher"]
    diffs = [_diff(layer) for layer in layers]
    root = tmp_path / "docker"
    for n, chain in enumerate(ls.chain_ids(diffs)):
        entry = root / "image" / "overlay2" / "layerdb" / "sha256" / chain.split(":", 1)[1]
        entry.mkdir(parents=True)
        (entry / "cache-id").write_text(f"cache{n}\n")
        (root / "overlay2" / f"cache{n}" / "diff" / "etc").mkdir(parents=True)
    (root / "overlay2" / "cache0" / "diff" / "etc" / "hosts").write_bytes(b"127.0.0.1 localhost\n")
    os.symlink("/etc/ssl/SECRET-LINK", root / "overlay2" / "cache1" / "diff" / "etc" / "ca")
    (root / "overlay2" / "cache2" / "diff" / "etc" / "SECRET-NAME").write_bytes(b"")
    image = _Image({}, layers)
    info = {"Driver": "overlay2", "DockerRootDir": str(root)}
    assert ls.dirty_layers(image, info, ls.Scanned(tmp_path / "s", [b"SECRET-LINK"])) == ([diffs[1]], 3)
    assert ls.dirty_layers(image, info, ls.Scanned(tmp_path / "s", [b"SECRET-NAME"])) == ([diffs[2]], 3)
    scanned = ls.Scanned(tmp_path / "s", [b"localhost"])
    assert ls.dirty_layers(image, info, scanned) == ([diffs[0]], 3)
    assert ls.dirty_layers(image, info, scanned) == ([diffs[0]], 1) and image.saves == 0
    # a layer database it cannot read: the whole image is saved and searched instead
    (root / "overlay2" / "cache1" / "diff").rename(root / "gone")
    assert ls.overlay_dirs(info, diffs) is None
