"""Typed findings (torchpod.fabric.findings) and the one GPU count (torchpod.gpus.visible):
the doctor's rows and exit codes follow codes and severities, never the words of a message.
(The FABRICS table's own tests are in test_registry.py, the Slingshot record's in test_slingshot.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchpod import gpus
from torchpod.doctor import Machine, exit_code, preflight, refusal
from torchpod.fabric import by_name, detect_fabric
from torchpod.fabric.findings import Finding, Severity
from torchpod.fabric.site import SITE_LIB

from fabric_cases import FIXTURES, write_node

# Environments that make the detectors and the site search say every kind of finding:
# users' variables that contradict the hardware, presets over and beside detection.
ENVS = (
    {},
    {"NCCL_IB_GID_INDEX": "1", "NCCL_IB_HCA": "=mlx5_9", "FI_PROVIDER": "verbs"},
    {"NCCL_IB_GID_INDEX": "\u0663", "NCCL_NET_PLUGIN": "ofi"},
    {"TORCHPOD_PRESET": "oci-bm-gpu-h100.8"},
    {"TORCHPOD_PRESET": "hpe-slingshot-gh200", "FI_PROVIDER": "efa"},
)
LOADED = {"loaded": "libnccl-net.so", "path": f"{SITE_LIB}/libnccl-net.so", "tried": [], "exported": [10, 9],
          "nccl": "2.30.7", "wanted": [12, 11, 10], "chosen": 10, "plugin_name": "Libfabric",
          "libfabric": {"path": f"{SITE_LIB}/libfabric.so.1", "abi": "FABRIC_1.8", "version": "2.1"}}
MACHINES = (  # a healthy node, and one where every machine check fails or warns
    {"uverbs": ("/dev/infiniband/uverbs0",), "shm_bytes": 8 << 30, "providers": ("efa", "mlx5"), "gpu_count": 8,
     "net_probe": LOADED, "fi_providers": ("cxi", "efa", "tcp"), "fi_devices": ("cxi", "efa")},
    {"memlock": 64 << 10, "shm_bytes": 64 << 20, "verbs_error": "libibverbs.so.1: cannot open shared object file",
     "net_probe": {"loaded": None, "tried": [{"name": "libnccl-net.so", "error": "not found"}]}},
)


@pytest.fixture(scope="module")
def nodes(tmp_path_factory) -> dict[str, tuple[Path, Path, Path]]:
    """Every fabric fixture written out once, with a site plugin injected under its root."""
    out = {}
    for name, case in FIXTURES.items():
        root = tmp_path_factory.mktemp(name)
        lib = root / SITE_LIB.lstrip("/")
        lib.mkdir(parents=True)
        (lib / "libnccl-net.so").write_bytes(b"")
        out[name] = (root, *write_node(root, case))
    return out


def verdicts(nodes) -> list:
    """Every row's (name, status, code) and every exit code and refusal-or-not, over every
    fixture x environment x machine."""
    got = []
    for name, (root, sysfs, proc) in sorted(nodes.items()):
        for env in ENVS:
            for machine in MACHINES:
                fabric, checks = preflight({**(FIXTURES[name].get("env") or {}), **env},
                                           Machine(sysfs_root=sysfs, proc_root=proc, root=root, **machine))
                got.append((name, fabric.fabric, tuple((c.name, c.status, c.finding.code) for c in checks),
                            exit_code(fabric, checks, None), refusal(checks) is None))
    return got


@pytest.fixture(scope="module")
def baseline(nodes) -> list:
    return verdicts(nodes)


def test_the_baseline_covers_every_kind_of_row(baseline):
    rows = {(name, status) for b in baseline for name, status, _ in b[2]}
    assert {("user-setting", "warn"), ("gid", "ok"), ("gid", "warn"), ("uverbs", "fail"), ("net-plugin", "ok"),
            ("net-plugin", "fail"), ("fi-provider", "ok"), ("fi-provider-env", "fail")} <= rows
    assert {b[3] for b in baseline} == {0, 1}


@settings(deadline=None, max_examples=12)
@given(words=st.text(max_size=40))
def test_rewording_every_message_changes_no_row_and_no_exit_code(nodes, baseline, words):
    """Every finding (the fabric's and the doctor's own) is built through Finding: give each
    a message of arbitrary Unicode, control characters included, and a fix to match."""
    original = Finding.__post_init__

    def reworded(self):
        original(self)
        object.__setattr__(self, "message", f"{words}{len(self.code)}")
        object.__setattr__(self, "fix", words[::-1])

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Finding, "__post_init__", reworded)
        assert verdicts(nodes) == baseline


@pytest.mark.parametrize("code, severity", [("roce", Severity.OK), ("Roce.gid", Severity.OK),
                                            ("roce.gid differs", Severity.WARN), ("roce.gid.\u00e9", Severity.OK),
                                            ("roce.gid", "warn"), ("a.b.c.d.e", Severity.OK), ("", Severity.OK)])
def test_a_finding_needs_a_code_of_its_grammar_and_a_severity(code, severity):
    with pytest.raises(ValueError, match="finding code"):
        Finding(code, severity, "message")


def test_codes_name_conditions_not_wording(nodes):
    """Every code a fixture produces follows <area>.<topic>[.<what>]; one code, one severity."""
    seen: dict[str, Severity] = {}
    for name, (root, sysfs, proc) in nodes.items():
        for env in ENVS:
            for f in detect_fabric({**(FIXTURES[name].get("env") or {}), **env}, sysfs, proc, root).findings:
                assert seen.setdefault(f.code, f.severity) is f.severity, f.code
    assert {"roce.gid.chosen", "roce.gid.differs", "verbs.user.hca-selects-none", "slingshot.settings",
            "site.plugin.injected", "preset.gid.over-detection"} <= set(seen)


# --- one set of Slingshot settings, detected or preset ----------------------------------------

def test_the_plan_and_the_preset_set_the_same_slingshot_values(nodes):
    root, sysfs, proc = nodes["gh200_slingshot_node"]
    detected = dict(detect_fabric({}, sysfs, proc, root).env)
    preset = dict(detect_fabric({"TORCHPOD_PRESET": "hpe-slingshot-gh200"}, sysfs, proc, root).env)
    assert {s.var: s.value for s in by_name("slingshot").plugin_env}.items() <= detected.items()
    assert detected == preset


# --- GPUs counted once ------------------------------------------------------------------------

GPU_LISTS = st.one_of(st.none(), st.text(max_size=12),
                      st.lists(st.sampled_from(["0", "1", "7", "-1", "GPU-ab12", "MIG-1", "all", "none", "void",
                                                " 2", "\u0663"]), max_size=4).map(",".join))


@settings(deadline=None, max_examples=300)
@given(cuda=GPU_LISTS, nvidia=GPU_LISTS, listed=st.one_of(st.none(), st.integers(0, 16)))
def test_nproc_and_the_doctor_count_the_same_gpus(cuda, nvidia, listed):
    env = {k: v for k, v in (("CUDA_VISIBLE_DEVICES", cuda), ("NVIDIA_VISIBLE_DEVICES", nvidia)) if v is not None}
    count, why = gpus.visible(env, listed)
    nproc, nwhy = gpus.default_nproc(env, listed)
    assert count >= 0 and int(nproc) == max(1, count) and nwhy.startswith(why)
    if "CUDA_VISIBLE_DEVICES" in env:
        assert count == gpus.visible_count(env["CUDA_VISIBLE_DEVICES"])
