"""IMEX channels against NCCL_MNNVL_ENABLE on GB200-class nodes (fabric/imex.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchpod.fabric.imex import check

GB200_INFO = ("Model: \t\t NVIDIA GB200\nIRQ:   \t\t 0\nGPU UUID: \t GPU-0a1b\nVideo BIOS: \t 97.00.a1.00.1c\n"
              "Bus Type: \t PCIe\nDMA Size: \t 48 bits\nBus Location: \t 0008:01:00.0\n")
H100_INFO = "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 0\nBus Location: \t 0000:18:00.0\n"


def node(tmp_path: Path, model: str | None, channels: int) -> tuple[Path, Path]:
    root, proc = tmp_path / "root", tmp_path / "proc"
    (root / "dev" / "nvidia-caps-imex-channels").mkdir(parents=True)
    for i in range(channels):
        (root / "dev" / "nvidia-caps-imex-channels" / f"channel{i}").write_text("")
    if model is not None:
        (proc / "driver" / "nvidia" / "gpus" / "0008:01:00.0").mkdir(parents=True)
        (proc / "driver" / "nvidia" / "gpus" / "0008:01:00.0" / "information").write_text(model)
    return root, proc


@pytest.mark.parametrize("model, channels, env, code, severity", [
    (GB200_INFO, 1, {}, "imex.mnnvl.ok", "ok"),
    (GB200_INFO, 0, {}, "imex.mnnvl.no-channel", "fail"),
    (GB200_INFO, 0, {"NCCL_MNNVL_ENABLE": "0"}, "imex.mnnvl.disabled", "warn"),
    (GB200_INFO, 1, {"NCCL_MNNVL_ENABLE": "0"}, "imex.mnnvl.disabled", "warn"),
    (H100_INFO, 0, {"NCCL_MNNVL_ENABLE": "1"}, "imex.mnnvl.no-channel", "fail"),
    (H100_INFO, 0, {"NCCL_MNNVL_ENABLE": "yes"}, "imex.mnnvl.bad-value", "warn"),
])
def test_channels_against_the_variable(tmp_path, model, channels, env, code, severity):
    root, proc = node(tmp_path, model, channels)
    [finding] = check(env, root, proc)
    assert (finding.code, finding.severity.value) == (code, severity)


def test_an_ordinary_node_gets_no_row(tmp_path):
    root, proc = node(tmp_path, H100_INFO, 0)
    assert check({}, root, proc) == []


def test_hostile_information_files_and_channel_names(tmp_path):
    root, proc = node(tmp_path, None, 0)
    (root / "dev" / "nvidia-caps-imex-channels" / "channel\n0").write_text("")
    gpu = proc / "driver" / "nvidia" / "gpus" / "x"
    gpu.mkdir(parents=True)
    (gpu / "information").symlink_to("/dev/zero")
    assert check({}, root, proc) == []
