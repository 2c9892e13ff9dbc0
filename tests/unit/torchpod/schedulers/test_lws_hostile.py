"""torchpod.schedulers.lws, hostile: LWS_LEADER_ADDRESS / LWS_GROUP_SIZE / LWS_WORKER_INDEX
holding any text (all of Unicode, control characters, every line ending): a plan whose
count, index and endpoint are the group's, or exactly one line, through ``cli.main``;
never a one-node plan for a group of several."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from hostile_reads import SETTINGS, TRICKY, base_env, ends_well, error_of, main, sane_plan

TEXT = st.one_of(st.text(max_size=40), st.text(alphabet=TRICKY + "lws.-", max_size=20))
NAMES = ("LWS_LEADER_ADDRESS", "LWS_GROUP_SIZE", "LWS_WORKER_INDEX")


@st.composite
def groups(draw):
    """A pod's variables as the LWS controller sets them, then one or two of them replaced
    by any text or removed."""
    size = draw(st.integers(1, 5))
    env = {"LWS_LEADER_ADDRESS": draw(st.sampled_from(["llama-0.llama.default", "10.244.1.7", "fd00::7"])),
           "LWS_GROUP_SIZE": str(size), "LWS_WORKER_INDEX": str(draw(st.integers(0, size - 1)))}
    for name in draw(st.lists(st.sampled_from(NAMES), max_size=2)):
        value = draw(st.one_of(st.none(), TEXT, st.integers(0, 6).map(str)))
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


@SETTINGS
@given(groups())
def test_any_lws_variables_give_the_groups_plan_or_one_line(more):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        result = main(["plan"], base_env(root, **more), root)
        if ends_well(result) is not None:
            return
        got = json.loads(result[1])
        if not any(v.strip() for v in more.values()):
            assert got["scheduler"] == "standalone"  # blank is unset (values.get)
            return
        sane_plan(result[1], "lws")
        assert got["nnodes"] == str(int(more["LWS_GROUP_SIZE"].strip()))
        assert got["node_rank"] == int(more["LWS_WORKER_INDEX"].strip()) < int(got["nnodes"])
        assert got["rdzv_endpoint"].lstrip("[").startswith(more["LWS_LEADER_ADDRESS"].strip())


def test_a_group_of_zero_is_one_line_naming_it(tmp_path):
    env = base_env(tmp_path, LWS_LEADER_ADDRESS="l-0.l.default", LWS_GROUP_SIZE="0", LWS_WORKER_INDEX="0")
    line = error_of(["plan"], env, tmp_path)
    assert "LWS_GROUP_SIZE='0'" in line and ">= 1" in line, line


def test_a_leader_address_with_a_newline_is_one_line(tmp_path):
    env = base_env(tmp_path, LWS_LEADER_ADDRESS="l-0.l\nevil", LWS_GROUP_SIZE="2", LWS_WORKER_INDEX="1")
    line = error_of(["plan"], env, tmp_path)
    assert "LWS_LEADER_ADDRESS=" in line and "expected a host name" in line, line
