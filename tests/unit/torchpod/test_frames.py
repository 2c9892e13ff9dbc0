"""torchpod.frames: which frame is the user's own, the one answer the stack reader and the
hang watch's thread share."""

from __future__ import annotations

import os
import sysconfig
from pathlib import Path

import pytest

import torchpod
from torchpod import frames

LAUNCHER = Path(torchpod.__file__).resolve().parent


@pytest.mark.parametrize("filename", [
    "/workspace/train.py", "/home/u/project/data/loader.py", "train.py", "<string>",
    "/opt/site/packages.py",  # words near a library's, not a library's folder
])
def test_a_script_and_its_own_modules_are_the_users(filename):
    assert frames.users(filename, roots=())


@pytest.mark.parametrize("filename", [
    "/usr/lib/python3.11/threading.py", "/opt/conda/lib/python3.12/selectors.py",
    "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py",
    "/usr/lib/python3/dist-packages/numpy/core.py", "<frozen runpy>", "<frozen importlib._bootstrap>",
    str(LAUNCHER / "watch" / "worker.py"), str(LAUNCHER / "shim" / "sitecustomize.py"),
])
def test_the_interpreters_packages_and_torchpods_frames_are_not(filename):
    assert not frames.users(filename, roots=())


def test_a_library_folder_the_words_miss_is_known_by_this_interpreters_roots_through_links(tmp_path):
    library = tmp_path / "pythonhome" / "Lib"
    library.mkdir(parents=True)
    (library / "queue.py").write_text("")
    link = tmp_path / "linked"
    link.symlink_to(library)
    roots = (os.path.realpath(library) + os.sep,)
    assert not frames.users(str(link / "queue.py"), roots)
    assert frames.users(str(tmp_path / "train.py"), roots)


def test_this_interpreters_standard_library_is_not_the_users():
    assert not frames.users(os.path.join(sysconfig.get_paths()["stdlib"], "threading.py"))
