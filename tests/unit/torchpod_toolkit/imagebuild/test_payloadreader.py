"""torchpod_toolkit.imagebuild.payloadreader: the payload's build context carries the
launcher's bounded reader byte for byte, and a drifted copy is found and written anew."""

from __future__ import annotations

import shutil
import subprocess
import sys

from torchpod_toolkit.imagebuild import payload, payloadreader

from paths import ROOT


def test_the_committed_copy_is_the_launchers_reader():
    stale = payloadreader.differences(ROOT)
    assert not stale, (f"docker/payload/reader/ differs from the launcher's modules in {stale}: run "
                       "`python3 -m torchpod_toolkit.imagebuild.payloadreader`")


def _checkout(tmp_path):
    for name in payloadreader.SOURCES:
        (tmp_path / payloadreader.LAUNCHER).mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / payloadreader.LAUNCHER / name, tmp_path / payloadreader.LAUNCHER / name)
    return tmp_path


def test_a_drifted_copy_is_named_file_by_file_and_written_anew(tmp_path):
    root = _checkout(tmp_path)
    assert payloadreader.differences(root) == ["__init__.py", "errors.py", "readers.py", "words.py"]  # no copy yet
    assert payloadreader.write(root) == ["__init__.py", "errors.py", "readers.py", "words.py"]
    copy = root / payloadreader.COPY
    (copy / "readers.py").write_text((copy / "readers.py").read_text().replace("MiB = 1 << 10, 1 << 20",
                                                                              "MiB = 1 << 10, 1 << 21"))
    (copy / "words.py").unlink()
    (copy / "old.py").write_text("")  # a module the launcher no longer has
    (copy / "notes.txt").write_text("")  # not Python: not the copy's business
    assert payloadreader.differences(root) == ["old.py", "readers.py", "words.py"]
    assert payloadreader.write(root) == ["old.py", "readers.py", "words.py"]
    assert payloadreader.differences(root) == [] and not (copy / "old.py").exists()
    for name in payloadreader.SOURCES:
        assert (copy / name).read_bytes() == (root / payloadreader.LAUNCHER / name).read_bytes()


def test_the_copy_reads_alone_without_torchpod_on_the_path(tmp_path):
    """What shards.py has in the build: the copy's package and the standard library (-S: no
    site-packages, where an editable torchpod would be), nothing else."""
    folder = str(ROOT / "docker" / "payload")
    probe = (f"import sys; sys.path[:0] = [{folder!r}]; from reader.readers import read_text, DATA_CAP; "
             "print(read_text(sys.argv[1], what='x', expected='y', cap=DATA_CAP), 'torchpod' in sys.modules)")
    (tmp_path / "lock").write_text("a==1 --hash=sha256:aa  # a.whl")
    done = subprocess.run([sys.executable, "-S", "-B", "-c", probe, str(tmp_path / "lock")], capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0 and done.stdout == "a==1 --hash=sha256:aa  # a.whl False\n", done.stderr


def test_the_copy_is_an_input_of_the_payload_image():
    """An edit of the reader builds the payload again: its files are in the payload's key."""
    scripts = payload.payload_scripts(ROOT)
    for name in ("__init__.py", *payloadreader.SOURCES):
        assert f"reader/{name}\0".encode() in scripts
