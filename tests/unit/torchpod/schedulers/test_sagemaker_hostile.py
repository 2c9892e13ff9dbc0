"""torchpod.schedulers.sagemaker, hostile: SM_HOSTS / SM_CURRENT_HOST / SM_NUM_GPUS holding
any text (all of Unicode, control characters, JSON of every shape): a plan naming only
well-formed hosts, or exactly one line, through ``cli.main``; never a one-node plan."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from hostile_reads import SETTINGS, TRICKY, base_env, ends_well, main, plan, sane_plan

TEXT = st.one_of(st.text(max_size=40), st.text(alphabet=TRICKY + "algo-", max_size=20))
HOSTS = st.one_of(
    TEXT,
    st.lists(TEXT, max_size=4).map(json.dumps),
    st.lists(st.sampled_from(["algo-1", "algo-2", "algo-3"]), min_size=1, max_size=4).map(json.dumps),
    st.recursive(st.none() | st.integers() | TEXT, lambda c: st.lists(c, max_size=3), max_leaves=6).map(json.dumps),
    st.just("[" * 5000),
)


def test_a_three_host_job_plans_three_nodes(tmp_path):
    env = base_env(tmp_path, SM_HOSTS='["algo-1","algo-2","algo-3"]', SM_CURRENT_HOST="algo-3")
    got = plan(env, tmp_path)
    assert (got["nnodes"], got["node_rank"], got["rdzv_endpoint"]) == ("3", 2, "algo-1:29400")


@SETTINGS
@given(hosts=HOSTS, current=st.one_of(TEXT, st.sampled_from(["algo-1", "algo-2"])),
       gpus=st.one_of(st.none(), TEXT))
def test_any_sagemaker_variables_give_a_plan_or_one_line(hosts, current, gpus):
    more = {"SM_HOSTS": hosts, "SM_CURRENT_HOST": current}
    if gpus is not None:
        more["SM_NUM_GPUS"] = gpus
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        code, out, err = main(["plan"], base_env(root, **more), root)
        line = ends_well((code, out, err))
        if line is None and not (hosts.strip() or current.strip()):
            assert json.loads(out)["scheduler"] == "standalone"  # blank is unset (values.get)
        elif line is None:
            sane_plan(out, "sagemaker")
            listed = json.loads(hosts)
            got = json.loads(out)
            assert int(got["nnodes"]) == len(listed)
            assert got["node_rank"] == listed.index(current.strip())
            assert got["rdzv_endpoint"] == f"{listed[0]}:29400"
        elif hosts.strip() and current.strip():
            assert "SM_" in line, line
