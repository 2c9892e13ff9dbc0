"""torchpod.facts: what the machine says (GPUs, Slurm hosts, the sysfs root, torchrun's
flags), read once per command under one deadline; the launcher and preflight share it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from torchpod import facts
from torchpod.errors import InputError


def _tool(folder: Path, name: str, script: str) -> None:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text("#!/bin/sh\n" + script)
    (folder / name).chmod(0o755)


def test_gpus_are_counted_from_nvidia_smi_only_when_the_environment_leaves_it_open(tmp_path, monkeypatch):
    _tool(tmp_path / "bin", "nvidia-smi", "echo 'GPU 0: H100 (UUID: GPU-a)'; echo 'GPU 1: H100 (UUID: GPU-b)'\n")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert facts.gpu_count({}) == 2
    assert facts.gather_facts({"TORCHPOD_HOSTNAME": "n1"}).gpu_count == 2
    assert facts.gpu_count({"CUDA_VISIBLE_DEVICES": "0"}) is None  # the variable answers; no tool asked


def test_a_helper_that_fails_is_a_note_and_no_count(tmp_path, monkeypatch):
    _tool(tmp_path / "bin", "nvidia-smi", "echo 'NVIDIA-SMI has failed' >&2; exit 9\n")
    _tool(tmp_path / "bin", "scontrol", "exit 1\n")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    got = facts.gather_facts({"TORCHPOD_HOSTNAME": "n1", "SLURM_JOB_NODELIST": "n[1-2]"})
    assert got.gpu_count is None and got.slurm_hosts is None
    assert any(n.startswith("nvidia-smi -L ") and "GPUs not counted" in n for n in got.notes)
    assert any(n.startswith("scontrol show hostnames ") and "torchpod's parser" in n for n in got.notes)


def test_scontrol_expands_the_hosts(tmp_path, monkeypatch):
    _tool(tmp_path / "bin", "scontrol", 'echo gpu009; echo gpu010\n')
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    got = facts.gather_facts({"TORCHPOD_HOSTNAME": "gpu010", "SLURM_JOB_NODELIST": "gpu[009-010]",
                              "CUDA_VISIBLE_DEVICES": ""})
    assert got.slurm_hosts == ("gpu009", "gpu010") and got.hostname == "gpu010" and got.notes == ()


def test_the_sysfs_root_is_a_directory(tmp_path):
    assert facts.sysfs_root("--sysfs-root", str(tmp_path)) == tmp_path
    assert facts.configured_sysfs({}) == Path("/sys")
    assert facts.configured_sysfs({"TORCHPOD_SYSFS_ROOT": f" {tmp_path} "}) == tmp_path
    with pytest.raises(InputError, match=r"^--sysfs-root='.*nowhere' does not exist; expected an existing directory"):
        facts.sysfs_root("--sysfs-root", str(tmp_path / "nowhere"))
    # the setting a job script hands every node alike: a node without the path has no RDMA
    assert facts.configured_sysfs({"TORCHPOD_SYSFS_ROOT": str(tmp_path / "nowhere")}) == tmp_path / "nowhere"
    (tmp_path / "file").write_text("")
    with pytest.raises(InputError, match=r"^--sysfs-root='.*file' is not a directory; expected"):
        facts.sysfs_root("--sysfs-root", str(tmp_path / "file"))


def test_signals_flag_detected_from_the_installed_torch(tmp_path, monkeypatch):
    from torchpod.facts import torchrun_accepts

    assert torchrun_accepts("--signals-to-handle")  # the host's torch (>= 2.10)
    assert not torchrun_accepts("--no-such-torchrun-option")
    # a torch tree whose run.py lacks the flag, found first on sys.path
    _older_torch(tmp_path, monkeypatch, 'parser.add_argument("--max-restarts")\n')
    assert not torchrun_accepts("--signals-to-handle")
    assert torchrun_accepts("--max-restarts")


def _older_torch(tmp_path, monkeypatch, run_py: str):
    """A torch tree found first on sys.path whose run.py is ``run_py``."""
    fake = tmp_path / "torch"
    (fake / "distributed").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "distributed" / "run.py").write_text(run_py)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "torch", raising=False)  # find_spec looks there first
    return fake / "distributed" / "run.py"


# torch 2.11's torchrun, as the GPU check's machine had it: --tee and --log-dir, no --shutdown-timeout
# (added upstream by pytorch/pytorch#172596, in torch 2.13's run.py)
TORCH_2_11 = 'parser.add_argument("--log-dir", "--log_dir")\nparser.add_argument("-t", "--tee")\n'


def test_a_passed_through_option_this_torchrun_lacks_is_named_with_its_run_py(tmp_path, monkeypatch):
    from torchpod.facts import torchrun_lacks

    run_py = _older_torch(tmp_path, monkeypatch, TORCH_2_11)
    assert torchrun_lacks(()) is None
    assert torchrun_lacks(("--log-dir=/tmp/logs", "-t=3")) is None
    line = torchrun_lacks(("--log-dir=/tmp/logs", "--shutdown-timeout=60", "--no-such=1"))
    assert line.startswith("--shutdown-timeout: the installed torch's torchrun has no such option")
    assert str(run_py) in line and "\n" not in line and "60" not in line


def test_with_no_readable_torch_nothing_is_refused_here(tmp_path, monkeypatch):
    from torchpod.facts import torchrun_lacks

    run_py = _older_torch(tmp_path, monkeypatch, TORCH_2_11)
    run_py.unlink()
    run_py.mkdir()  # a folder where run.py should be: unreadable, so torchrun itself will say
    assert torchrun_lacks(("--shutdown-timeout=60",)) is None
