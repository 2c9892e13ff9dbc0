"""Before Docker runs, every wheel pin must exist for each arch (torchpod_toolkit.imagebuild.resolver.
check_wheels): real pip against a wheelhouse of small wheels made here, offline."""

from __future__ import annotations

import pytest
from small_wheels import make_wheel

from torchpod.arch import normalise_arch
from torchpod.errors import InputError
from torchpod_toolkit.imagebuild.definitions import load_definitions
from torchpod_toolkit.imagebuild.resolver import check_wheels

DEFINITION = """\
arches: [x86_64, aarch64]
base: {debian: bookworm}
python: "3.11"
torch: {version: "2.13.0", torchvision: "0.28.0", index_url: https://pypi.org/simple}
expect: {cuda: "13.0", nccl: "2.29.7"}
rdma_core: {packages: [libibverbs1], providers: [mlx5]}
"""


@pytest.fixture
def setup(tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    (images / "img.yaml").write_text(DEFINITION)
    house = tmp_path / "wheels"
    house.mkdir()
    for arch in ("x86_64", "aarch64"):
        make_wheel(house, "torch", "2.13.0", f"cp311-cp311-manylinux_2_28_{arch}")
    make_wheel(house, "torchvision", "0.28.0", "cp311-cp311-manylinux_2_28_x86_64")  # no aarch64 build
    return load_definitions(images)["img"], house, tmp_path / "cache"


def test_a_pin_missing_for_one_arch_is_named_before_docker(setup):
    defn, house, cache = setup
    check_wheels(defn, normalise_arch("x86_64"), cache, None, house)
    with pytest.raises(InputError) as info:
        check_wheels(defn, normalise_arch("aarch64"), cache, None, house)
    message = str(info.value)
    assert message.startswith("img.yaml: torchvision==0.28.0 has no wheel for aarch64 (CPython 3.11")
    assert f"the wheelhouse {house}" in message and "drop aarch64 from 'arches'" in message
    assert "\n" not in message


def test_a_passing_check_is_remembered(setup):
    defn, house, cache = setup
    check_wheels(defn, normalise_arch("x86_64"), cache, None, house)
    for wheel in house.iterdir():
        wheel.unlink()  # pip would fail now: only the remembered answer can pass
    check_wheels(defn, normalise_arch("x86_64"), cache, None, house)
    with pytest.raises(InputError):
        check_wheels(defn, normalise_arch("aarch64"), cache, None, house)
