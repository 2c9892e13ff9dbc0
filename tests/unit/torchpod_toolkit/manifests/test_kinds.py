"""manifests/kinds/: one module per job kind, found in the folder and placed in KINDS by its
record's order; a made-up kind added as one module in a copy of the toolkit, and no edit
anywhere else, is taken up by the option checks, the renderer, the header and the harness."""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
import textwrap

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


# The made-up kind: a second name for a JobSet (its builder and operator model exist), whose
# pod template is written in full. Nothing else in the toolkit names it.
MADE_UP = '''
from torchpod.contract import RDZV_PORT_DEFAULT
from torchpod_toolkit.manifests import operators
from torchpod_toolkit.manifests.kinds.record import JobKind

KIND = JobKind("gang", "jobset", RDZV_PORT_DEFAULT, "gang", operators.jobset, "JobSet >= 0.7 (as gang)",
               "kubectl apply -f", "yaml", "job_set", pod_fields=True, priority_class=True, workdir=True)
'''

# Run in a fresh interpreter on the copy of the toolkit that holds the new module, and on
# nothing else of the toolkit.
PROBE = '''
import json, sys
sys.path.insert(0, sys.argv[1])
from torchpod_toolkit.manifests import kinds
assert kinds.__file__.startswith(sys.argv[1]), kinds.__file__
from torchpod.errors import InputError
from torchpod_toolkit.cluster import topology
from torchpod_toolkit.manifests import render, spec

def refusal(nodes=2, **fields):
    try:
        render.render(spec.JobSpec("gang", nodes, sys.argv[2], ("t.py",), **fields))
    except InputError as exc:
        return str(exc)

(out,) = render.render(spec.JobSpec("gang", 2, sys.argv[2], ("t.py",), priority_class="high", service_account="sa"))
print(json.dumps({"schedulers": spec.SCHEDULERS, "pod_kinds": spec.POD_KINDS, "name": out.name, "text": out.text,
                  "queue": refusal(queue="gpu"), "mnnvl": refusal(mnnvl=True, gpus_per_node=4),
                  "range": refusal(nodes="2:3"), "harness": topology.build("gang", 2, "job-1").scheduler}))
'''


def test_a_made_up_kind_in_one_module_is_taken_up_everywhere(tmp_path):
    copy = tmp_path / "torchpod_toolkit"
    shutil.copytree(FOLDER.parents[1], copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "manifests" / "kinds" / "gang.py").write_text(textwrap.dedent(MADE_UP))
    run = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path), IMAGE], capture_output=True, text=True,
                         timeout=120, check=True)
    seen = json.loads(run.stdout)
    assert seen["schedulers"][-1] == "gang" and seen["pod_kinds"][-1] == "gang"
    assert seen["name"] == "train.gang.yaml" and "# Submit: kubectl apply -f train.gang.yaml   (needs JobSet >= 0.7 " \
        "(as gang))" in seen["text"]
    assert "kind: JobSet" in seen["text"] and "priorityClassName: high" in seen["text"]
    assert "serviceAccountName: sa" in seen["text"]
    assert "a gang job has no place for it" in seen["queue"] and "gang" not in seen["queue"].split("--scheduler")[-1]
    assert "--mnnvl with --scheduler gang: its pods cannot carry a resource claim" == seen["mnnvl"]
    assert "a gang job has a fixed size" in seen["range"]
    assert seen["harness"] == "jobset"


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
