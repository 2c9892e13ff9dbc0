"""manifests/kinds/: one module per job kind, found in the folder and placed in KINDS by its
record's order; made-up kinds added as one module each in a copy of the toolkit, and no edit
anywhere else, are taken up by the option checks, the renderer, the header, the harness's
scenarios (Kubernetes and batch) and both demos' checks."""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
import textwrap

import pytest

from torchpod_toolkit.manifests import jobs, kinds

from manifest_cases import IMAGE
from paths import ROOT

FOLDER = ROOT / "toolkit" / "torchpod_toolkit" / "manifests" / "kinds"


def test_every_module_in_the_folder_declares_one_registered_kind():
    names = sorted(p.stem for p in FOLDER.glob("*.py") if p.stem not in ("__init__", "record"))
    records = [importlib.import_module(f"torchpod_toolkit.manifests.kinds.{n}").KIND for n in names]
    assert sorted(r.name for r in records) == sorted(jobs.NAMES)
    assert [n.replace("_", "-") for n in names] == sorted(r.name for r in records)  # a module is named for its kind
    assert set(map(id, records)) == set(map(id, kinds.KINDS)) and len(kinds.KINDS) == len(set(jobs.NAMES))


# The made-up kinds, none of which anything else in the toolkit names. gang: a second name
# for a JobSet (its builder and operator model exist), whose pod template is written in full.
MADE_UP = '''
from torchpod.contract import RDZV_PORT_DEFAULT
from torchpod_toolkit.manifests.kinds.record import JobKind, Ref
from torchpod_toolkit.manifests.operators import JOBSET

KIND = JobKind("gang", "jobset", RDZV_PORT_DEFAULT, "gang", JOBSET, "JobSet >= 0.7 (as gang)",
               "kubectl apply -f", "yaml", Ref("kube", "job_set"), pod_fields=True, priority_class=True, workdir=True)
'''

# burst: a batch system whose nodes get Slurm's variables under names of its own
BURST = '''
from dataclasses import replace
from torchpod_toolkit.manifests.kinds import slurm

KIND = replace(slurm.KIND, name="burst", scenario="burst", nodes=replace(slurm.NODES, host="{name}-b{n:02d}"),
               order=2000)
'''

# pair: a Volcano job with a master task (so two nodes at least) that the Kubernetes harness cannot run
PAIR = '''
from dataclasses import replace
from torchpod_toolkit.manifests.kinds import volcano_master

KIND = replace(volcano_master.KIND, name="pair", scenario="pair", no_kube_harness="a pair job: none here", order=2001)
'''

# Run in a fresh interpreter on the copy of the toolkit that holds the new modules, and on
# nothing else of the toolkit.
PROBE = '''
import json, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from torchpod_toolkit.manifests import kinds
assert kinds.__file__.startswith(sys.argv[1]), kinds.__file__
from torchpod.errors import InputError
from torchpod_toolkit.cluster import demo, topology
from torchpod_toolkit.kube import demo as kube_demo
from torchpod_toolkit.manifests import render, spec

def refused(call, *args, **fields):
    try:
        call(*args, **fields)
    except InputError as exc:
        return str(exc)

def refusal(nodes=2, **fields):
    return refused(render.render, spec.JobSpec("gang", nodes, sys.argv[2], ("t.py",), **fields))

(out,) = render.render(spec.JobSpec("gang", 2, sys.argv[2], ("t.py",), priority_class="high", service_account="sa"))
(burst,) = render.render(spec.JobSpec("burst", 2, sys.argv[2], ("t.py",), qos="high"))
(pair,) = render.render(spec.JobSpec("pair", 2, sys.argv[2], ("t.py",)))
Path(sys.argv[1], pair.name).write_text(pair.text)
nodes = topology.build("burst", 2, "job-1").nodes
print(json.dumps({"schedulers": spec.SCHEDULERS, "pod_kinds": spec.POD_KINDS, "name": out.name, "text": out.text,
                  "queue": refusal(queue="gpu"), "mnnvl": refusal(mnnvl=True, gpus_per_node=4),
                  "range": refusal(nodes="2:3"), "harness": topology.build("gang", 2, "job-1").scheduler,
                  "burst": burst.name, "burst_text": burst.text,
                  "burst_harness": topology.build("burst", 2, "j").scheduler,
                  "burst_nodes": [[n.hostname, n.env_dict["SLURM_JOB_NODELIST"]] for n in nodes],
                  "pair_one": refused(render.render, spec.JobSpec("pair", 1, sys.argv[2], ("t.py",))),
                  "pair_pods": len(topology.build("pair", 2, "job-1").nodes),
                  "demo_one": refused(demo.check, demo.DemoRequest("pair", 1, "preflight", sys.argv[2]), 1 << 40),
                  "demo_two": refused(demo.check, demo.DemoRequest("pair", 2, "preflight", sys.argv[2]), 1 << 40),
                  "kube_demo": refused(kube_demo.read_manifest, Path(sys.argv[1], pair.name))}))
'''


@pytest.fixture(scope="module")
def seen(tmp_path_factory) -> dict:
    """What the copy of the toolkit holding the made-up kinds says of them (PROBE)."""
    tmp_path = tmp_path_factory.mktemp("made-up")
    copy = tmp_path / "torchpod_toolkit"
    shutil.copytree(FOLDER.parents[1], copy, ignore=shutil.ignore_patterns("__pycache__"))
    for name, text in (("gang", MADE_UP), ("burst", BURST), ("pair", PAIR)):
        (copy / "manifests" / "kinds" / f"{name}.py").write_text(textwrap.dedent(text))
    run = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path), IMAGE], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_a_made_up_kind_in_one_module_is_taken_up_everywhere(seen):
    assert seen["schedulers"][-3:] == ["gang", "burst", "pair"] and seen["pod_kinds"][-2:] == ["gang", "pair"]
    assert seen["name"] == "train.gang.yaml" and "# Submit: kubectl apply -f train.gang.yaml   (needs JobSet >= 0.7 " \
        "(as gang))" in seen["text"]
    assert "kind: JobSet" in seen["text"] and "priorityClassName: high" in seen["text"]
    assert "serviceAccountName: sa" in seen["text"]
    assert "a gang job has no place for it" in seen["queue"] and "gang" not in seen["queue"].split("--scheduler")[-1]
    assert "--mnnvl with --scheduler gang: its pods cannot carry a resource claim" == seen["mnnvl"]
    assert "a gang job has a fixed size" in seen["range"]
    assert seen["harness"] == "jobset"


def test_a_made_up_batch_kind_brings_its_script_and_its_harness_nodes(seen):
    assert seen["burst"] == "train.burst.sbatch" and "#SBATCH --qos=high" in seen["burst_text"]
    # the harness plays the nodes its record declares (JobKind.nodes), detected as the record says
    assert seen["burst_harness"] == "slurm"
    assert seen["burst_nodes"] == [["job-1-b01", "job-1-b[01-02]"], ["job-1-b02", "job-1-b[01-02]"]]


def test_a_made_up_kind_with_a_master_task_needs_two_nodes_in_the_checks_and_the_demos(seen):
    assert "expected 2 or more" in seen["pair_one"] and seen["pair_pods"] == 2
    # the demo's node check reads the record's min_nodes, and names every kind that has more than one
    assert seen["demo_one"] == "--nodes=1; expected 1 or more (volcano-master: 2 or more, pair: 2 or more)"
    assert seen["demo_two"] is None
    # the Kubernetes demo refuses the manifest of a kind whose record says the harness cannot run it
    # the kinds the harness runs are listed from the records: the new one, which it cannot run, is not among them
    said, _, runnable = seen["kube_demo"].partition("train.pair.yaml' is a pair job: none here; expected a ")
    assert said and runnable.endswith(" manifest") and "volcano-master" in runnable and "pair" not in runnable


def test_the_kinds_keep_the_order_every_list_follows():
    # the Kubernetes kinds first, Volcano's before the operators', the batch systems, SkyPilot last
    assert jobs.NAMES == ("volcano", "volcano-master", "kubeflow", "kubeflow-elastic", "trainer", "runai", "lws",
                          "jobset", "slurm", "pbs", "pbs-pals", "lsf", "skypilot")


def test_a_module_without_a_kind_is_refused_at_import(tmp_path):
    copy = tmp_path / "torchpod_toolkit"
    shutil.copytree(FOLDER.parents[1], copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "manifests" / "kinds" / "helpers.py").write_text("X = 1\n")
    run = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                          "import torchpod_toolkit.manifests.kinds", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "kinds.helpers declares no KIND" in run.stderr, run.stderr
