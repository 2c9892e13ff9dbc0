"""torchpod_toolkit.manifests.headers: the comment lines on top of every rendered file say how
to submit it, what it needs, how its nodes are ranked and how to regenerate it, in printable
ASCII only; a --pod-security level the pods cannot meet is refused in one line."""

from __future__ import annotations

import pytest

from torchpod.errors import InputError
from torchpod_toolkit.manifests import headers, jobs, kube
from torchpod_toolkit.manifests.spec import JobSpec, check

IMAGE = "registry.example.com/torchpod/pytorch:2.13.0-cuda13.0"


def _spec(scheduler: str, **change) -> JobSpec:
    return check(JobSpec(scheduler, 2, IMAGE, ("train.py",), **change))


def test_every_line_is_a_comment_and_the_last_regenerates_the_file():
    lines = headers.header(_spec("slurm"), "train.slurm.sbatch")
    assert all(ln.startswith("# ") for ln in lines)
    assert lines[0].startswith("# torchpod slurm job 'train': 2 nodes")
    assert lines[-1].startswith("# Regenerate: invoke manifests --scheduler slurm ")


def test_a_piped_file_says_how_to_submit_it_from_standard_input():
    kind = jobs.kind("slurm")
    assert headers.submit_line(kind, "f.sbatch", piped=False) == "Submit: sbatch f.sbatch"
    assert headers.submit_line(kind, "f.sbatch", piped=True).startswith("Submit: sbatch with this file on standard")


def test_a_batch_script_names_the_paths_every_node_must_share():
    (shared,) = headers.shared_paths(_spec("pbs", runtime="apptainer"))
    assert "the submit directory" in shared and "the SIF written there" in shared and "$PBS_NODEFILE" in shared


def test_the_pod_security_level_is_judged_on_the_rendered_pods():
    assert headers.pod_security(_spec("volcano"))[0] == "restricted"
    level, text = headers.pod_security(_spec("volcano", rdma="hostnetwork"))
    assert level == "privileged" and "hostNamespaces: RDMA over the host's NICs" in text


def test_a_script_nothing_mounts_is_noted():
    (note,) = headers.script_source(_spec("volcano"))
    assert note.startswith("Script: train.py is read from /workspace in the container")
    assert headers.script_source(_spec("slurm")) == []


def test_a_level_the_pods_cannot_meet_is_one_line():
    spec = _spec("volcano", rdma="hostnetwork", pod_security="baseline")
    with pytest.raises(InputError) as err:
        headers.require_level(spec, kube.objects(spec))
    assert str(err.value).startswith("--pod-security=baseline cannot be met: the pods fail hostNamespaces")
    assert "\n" not in str(err.value)


def test_a_line_outside_printable_ascii_is_refused_before_any_file_is_written():
    spec = JobSpec("slurm", 2, IMAGE, ("train.py",), name="tr\u00e4in", runtime="none")  # unchecked
    with pytest.raises(InputError, match="a header line would hold a character outside printable ASCII"):
        headers.header(spec, "f.sbatch")
