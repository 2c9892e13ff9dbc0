"""shellcheck (Debian's package) finds nothing in any job script `invoke manifests` writes:
every HPC scheduler x runtime under a few option sets (and the Run:ai submit script, and
the bash of a SkyPilot task's ``run``), with
ordinary and hostile arguments, and every script kept in manifests/.

One shellcheck run reads every file (it starts in about 0.2 s; once per file would be most
of this module's time); each case then reports its own file's findings. Without shellcheck
the tests skip with the reason, and fail in CI (TORCHPOD_REQUIRE_TOOLS=1).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from torchpod_toolkit.manifests import jobs, shellwords
from torchpod_toolkit.manifests import spec as spec_mod
from torchpod_toolkit.manifests.render import render
from torchpod_toolkit.manifests.spec import HPC, RUNTIMES, JobSpec

from paths import ROOT

IMAGE = "registry.example.com/torchpod/pytorch:2.13.0-cuda13.0"
COMMAND = ("/opt/torchpod/examples/ddp_resnet.py", "--steps", "200")
# words a shell would otherwise split, expand or run; the script must carry them as literals
HOSTILE = ("train.py", "$HOME", "$(id)", "`id`", "a b", "it's", '"q"', "\\", "x\ny", "*", "~", "!", "--", "")
OPTION_SETS = {
    "plain": {},
    "cpu-one-node-queue": dict(nodes=1, gpus_per_node=0, queue="debug", walltime="12:00:00"),
    "efa": dict(preset="aws-p5"),
    "slingshot": dict(preset="hpe-slingshot-gh200", gpus_per_node=4, site_lib="/opt/site/aws-ofi-nccl/lib"),
    "etcd": dict(rdzv="etcd", etcd_endpoint="etcd.example.com:2379"),
    "hostile-argv": dict(command=HOSTILE),
}
RUNAI_SETS = {
    "plain": {},
    "hostnetwork": dict(rdma="hostnetwork", preset="oci-bm-gpu-h100.8"),
    "device-plugin": dict(rdma="device-plugin", rdma_resource="rdma/rdma_shared_device_a"),
    "etcd-server": dict(rdzv="etcd", etcd_server=True),
    "hostile-argv": dict(command=HOSTILE),
}


def _spec(scheduler: str, runtime: str, options: dict) -> JobSpec:
    """The job with those of ``options`` its kind and runtime take (a SkyPilot task has no
    queue or wall time, a job without a container no bind for --site-lib: spec.check refuses
    them there)."""
    kinds = {name: how.kinds for name, how in spec_mod.options()}
    taken = {k: v for k, v in options.items() if kinds.get(k) is None or scheduler in kinds[k]}
    if runtime == "none" or scheduler == "skypilot":  # no container to bind the site's plugin into
        taken.pop("site_lib", None)
    return JobSpec(**{"scheduler": scheduler, "runtime": runtime, "nodes": 2, "image": IMAGE, "command": COMMAND,
                      **taken})


def _script(name: str, text: str) -> str:
    """The bash a rendered file runs: a job script itself, or a SkyPilot task's ``run``,
    which SkyPilot runs with bash (under the same directive as the scripts)."""
    if not name.endswith(".yaml"):
        return text
    return "\n".join(["#!/bin/bash", shellwords.SHELLCHECK, yaml.safe_load(text)["run"], ""])


def _rendered() -> dict[str, str]:
    """case id -> the text of the script it renders (a script shellcheck can read: '#!')."""
    cases = {}
    for scheduler in HPC:
        for runtime in jobs.kind(scheduler).runtimes or RUNTIMES:
            for label, options in OPTION_SETS.items():
                (out,) = render(_spec(scheduler, runtime, options))
                cases[f"{scheduler}-{runtime}-{label}"] = _script(out.name, out.text)
    for runtime in RUNTIMES:  # --requeue-lead: Slurm's USR1 trap and the step in the background
        (out,) = render(_spec("slurm", runtime, dict(requeue_lead=300, walltime="02:00:00")))
        cases[f"slurm-{runtime}-requeue"] = out.text
    for label, options in RUNAI_SETS.items():
        scripts = [o for o in render(_spec("runai", "", options)) if o.text.startswith("#!")]
        assert len(scripts) == 1
        cases[f"runai-{label}"] = scripts[0].text
    return cases


EXAMPLES = sorted(p for p in (ROOT / "manifests").rglob("*") if p.is_file() and p.read_bytes()[:2] == b"#!")


@pytest.fixture(scope="module")
def findings(require_tool, tmp_path_factory) -> dict[str, list[dict]]:
    """Every file's shellcheck findings (all severities, no user rc file), by file path."""
    shellcheck = require_tool("shellcheck", "shellcheck")
    where = tmp_path_factory.mktemp("shellcheck")
    files = []
    for case, text in _rendered().items():
        path = where / f"{case}.sh"
        path.write_text(text)
        files.append(str(path))
    files += [str(p) for p in EXAMPLES]
    try:
        proc = subprocess.run([shellcheck, "--norc", "--format=json1", "--severity=style", *files],
                              capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("shellcheck ran past 120 s")
    if proc.returncode not in (0, 1):  # 1: findings; anything else: shellcheck itself failed
        pytest.fail(f"shellcheck exited {proc.returncode}: {proc.stderr.strip()}")
    by_file: dict[str, list[dict]] = {f: [] for f in files}
    for comment in json.loads(proc.stdout)["comments"]:
        by_file[comment["file"]].append(comment)
    return {**{Path(f).stem: c for f, c in by_file.items() if f.startswith(str(where))},
            **{str(Path(f).relative_to(ROOT)): c for f, c in by_file.items() if not f.startswith(str(where))}}


def _report(comments: list[dict]) -> str:
    return "; ".join(f"line {c['line']}: SC{c['code']} ({c['level']}) {c['message']}" for c in comments)


@pytest.mark.parametrize("case", list(_rendered()))
def test_generated_script_is_shellcheck_clean(findings, case):
    assert findings[case] == [], _report(findings[case])


@pytest.mark.parametrize("example", [str(p.relative_to(ROOT)) for p in EXAMPLES])
def test_worked_example_is_shellcheck_clean(findings, example):
    assert findings[example] == [], _report(findings[example])


def test_worked_examples_are_found():
    """manifests/ holds Slurm and PBS scripts: an empty glob would check nothing, silently."""
    assert any(p.suffix == ".sbatch" for p in EXAMPLES) and any(p.parent.name == "pbs" for p in EXAMPLES)
