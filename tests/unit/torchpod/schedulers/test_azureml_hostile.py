"""torchpod.schedulers.azureml, hostile: the PyTorch distribution's variables
(AZUREML_NODE_COUNT, WORLD_SIZE, NODE_RANK, RANK, LOCAL_RANK, MASTER_ADDR) holding any text
(all of Unicode, control characters): a plan whose node count and index are node-level
values, or exactly one line, through ``cli.main``; never a process count read as nodes."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from hostile_reads import SETTINGS, TRICKY, base_env, ends_well, error_of, main, sane_plan

TEXT = st.one_of(st.text(max_size=30), st.text(alphabet=TRICKY, max_size=12))
NAMES = ("AZUREML_NODE_COUNT", "WORLD_SIZE", "NODE_RANK", "RANK", "LOCAL_RANK")


@st.composite
def jobs(draw):
    """A node's variables as the PyTorch distribution sets them with one process per node,
    then one or two of them replaced by any text or removed."""
    nodes = draw(st.integers(1, 4))
    node = draw(st.integers(0, nodes - 1))
    env = {"AZUREML_NODE_COUNT": str(nodes), "WORLD_SIZE": str(nodes), "NODE_RANK": str(node), "RANK": str(node),
           "LOCAL_RANK": "0", "MASTER_ADDR": "10.0.0.4"}
    for name in draw(st.lists(st.sampled_from([*NAMES, "MASTER_ADDR"]), max_size=2)):
        value = draw(st.one_of(st.none(), TEXT, st.integers(0, 9).map(str)))
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


@SETTINGS
@given(jobs())
def test_any_azureml_variables_give_a_node_level_plan_or_one_line(env):
    more = {"AZUREML_RUN_ID": "run_1", **env}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        result = main(["plan"], base_env(root, **more), root)
        if ends_well(result) is not None:
            return
        got = json.loads(result[1])
        if got["scheduler"] != "azureml":  # every distribution variable blank: a one-node job
            assert got["scheduler"] == "standalone", got["scheduler"]
            return
        sane_plan(result[1], "azureml")
        given_ = {name: (more.get(name) or "").strip() for name in NAMES}
        assert got["node_rank"] == int(given_["NODE_RANK"])
        if given_["LOCAL_RANK"]:
            assert int(given_["LOCAL_RANK"]) == 0
        if given_["RANK"]:
            assert int(given_["RANK"]) == got["node_rank"]
        assert got["nnodes"] == str(int(given_["AZUREML_NODE_COUNT"] or given_["WORLD_SIZE"]))
        if given_["WORLD_SIZE"]:
            assert int(given_["WORLD_SIZE"]) == int(got["nnodes"])  # processes = nodes, or refused


def test_several_processes_per_node_is_one_line_saying_what_to_set(tmp_path):
    env = base_env(tmp_path, AZUREML_RUN_ID="r", AZUREML_NODE_COUNT="2", MASTER_ADDR="10.0.0.4",
                   WORLD_SIZE="8", NODE_RANK="0", RANK="0", LOCAL_RANK="0")
    line = error_of(["plan"], env, tmp_path)
    assert "WORLD_SIZE='8'" in line and "process_count_per_instance: 1" in line, line
