"""torchpod_toolkit.manifests.hpc's SkyPilot task, judged by SkyPilot itself: its task schema
(sky.utils.schemas.get_task_schema) and its parser (sky.Task.from_yaml_config), run in the
environment setup.sh makes for it (the ``skypilot_python`` fixture: SkyPilot's cloud SDKs stay
out of the project's own environment)."""

from __future__ import annotations

import json
import subprocess

import yaml

from torchpod_toolkit.manifests import render as render_mod
from torchpod_toolkit.manifests.spec import JobSpec

from manifest_cases import IMAGE

JUDGE = """
import copy, json, sys
import sky
from sky.utils import common_utils, schemas
out = []
for task in json.load(sys.stdin):
    try:
        common_utils.validate_schema(task, schemas.get_task_schema(), "invalid task: ")
        parsed = sky.Task.from_yaml_config(copy.deepcopy(task))  # it pops the keys it reads
    except Exception as exc:  # SkyPilot's own verdict, reported back
        out.append({"refused": type(exc).__name__ + ": " + (str(exc).splitlines() or [""])[0]})
        continue
    out.append({"num_nodes": parsed.num_nodes, "run": parsed.run, "workdir": parsed.workdir})
print(json.dumps(out))
"""


def _task(**change) -> dict:
    (out,) = render_mod.render(JobSpec(**{"scheduler": "skypilot", "nodes": 3, "image": IMAGE,
                                          "command": ("train.py", "--lr", "1e-3"), **change}))
    return yaml.safe_load(out.text)


def _judge(python: str, tasks: list[dict]) -> list[dict]:
    proc = subprocess.run([python, "-c", JUDGE], input=json.dumps(tasks), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_skypilot_accepts_and_parses_every_task_torchpod_writes(skypilot_python):
    changes = ({}, {"gpus_per_node": 0}, {"preset": "aws-p5", "command": ("t.py", "a\nb", "$x", "it's")},
               {"workload": "preflight", "command": ()})
    tasks = [_task(**change) for change in changes]
    verdicts = _judge(skypilot_python, tasks)
    for task, verdict in zip(tasks, verdicts):
        assert verdict == {"num_nodes": 3, "run": task["run"], "workdir": "."}, verdict


def test_skypilots_schema_refuses_what_it_does_not_know(skypilot_python):
    """The judge is real: a misspelt key and a node count of the wrong type are refused."""
    misspelt = dict(_task(), num_node=3)
    wrong_type = dict(_task(), num_nodes="three")
    verdicts = _judge(skypilot_python, [misspelt, wrong_type])
    assert all("refused" in v for v in verdicts), verdicts
