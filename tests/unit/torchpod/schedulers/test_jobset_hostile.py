"""torchpod.schedulers.jobset, hostile: the JobSet labels a manifest passes by the downward
API (JOBSET_NAME, REPLICATED_JOB_NAME, JOB_INDEX, JOB_GLOBAL_INDEX, GLOBAL_REPLICAS) and
JOB_COMPLETION_INDEX holding any text (all of Unicode, control characters), with or
without --nnodes: a plan whose index lies inside the count, or exactly one line, through
``cli.main``."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from hostile_reads import SETTINGS, TRICKY, base_env, ends_well, error_of, main, sane_plan

TEXT = st.one_of(st.text(max_size=30), st.text(alphabet=TRICKY + "js", max_size=12))
NAMES = ("JOBSET_NAME", "REPLICATED_JOB_NAME", "JOB_INDEX", "JOB_GLOBAL_INDEX", "GLOBAL_REPLICAS",
         "JOB_COMPLETION_INDEX")


@st.composite
def layouts(draw):
    """A JobSet pod's variables as the controller's labels give them, then one or two of them
    (or --nnodes) replaced by any text or removed."""
    jobs, per_job = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    glob, pod = draw(st.integers(0, jobs - 1)), draw(st.integers(0, per_job - 1))
    env = {"JOBSET_NAME": "js", "REPLICATED_JOB_NAME": "w", "JOB_INDEX": str(glob), "JOB_GLOBAL_INDEX": str(glob),
           "GLOBAL_REPLICAS": str(jobs), "JOB_COMPLETION_INDEX": str(pod)}
    nnodes: str | None = str(jobs * per_job)
    for name in draw(st.lists(st.sampled_from([*NAMES, "--nnodes"]), max_size=2)):
        value = draw(st.one_of(st.none(), TEXT, st.integers(0, 9).map(str)))
        if name == "--nnodes":
            nnodes = value
        elif value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env, nnodes


@SETTINGS
@given(layouts())
def test_any_jobset_variables_give_a_plan_inside_the_count_or_one_line(layout):
    more, nnodes = layout
    argv = ["plan", *(["--nnodes", nnodes] if nnodes is not None else []), "train.py"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        result = main(argv, base_env(root, **more), root)
        if ends_well(result) is not None:
            return
        got = json.loads(result[1])
        if got["scheduler"] != "jobset":
            assert not any(v.strip() for v in more.values()), got["scheduler"]
            return
        sane_plan(result[1], "jobset")
        jobs = int(more["GLOBAL_REPLICAS"].strip())
        total = int(got["nnodes"].split(":")[-1])
        assert 0 <= got["node_rank"] < total
        assert jobs == 1 or total % jobs == 0
        assert got["node_rank"] % (total // jobs) == int(more["JOB_COMPLETION_INDEX"].strip())


def test_a_completion_index_alone_is_one_line_not_one_node(tmp_path):
    line = error_of(["plan", "train.py"], base_env(tmp_path, JOB_COMPLETION_INDEX="1"), tmp_path)
    assert "GLOBAL_REPLICAS is not set" in line and "jobset.sigs.k8s.io/global-replicas" in line, line
