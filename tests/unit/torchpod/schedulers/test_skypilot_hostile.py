"""torchpod.schedulers.skypilot, hostile: SKYPILOT_NODE_IPS / _NODE_RANK / _NUM_NODES /
_NUM_GPUS_PER_NODE holding any text (all of Unicode, control characters, every line
ending): a plan whose count agrees with the address list, or exactly one line, through
``cli.main``; never a one-node plan for a list of several."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from hostile_reads import SETTINGS, TRICKY, base_env, ends_well, main, sane_plan

TEXT = st.one_of(st.text(max_size=40), st.text(alphabet=TRICKY + "10.", max_size=20))
IPS = st.one_of(TEXT, st.lists(st.sampled_from(["10.0.0.1", "10.0.0.2", "10.0.0.3", " ", "fe80::1"]),
                               min_size=1, max_size=5).map("\n".join))
NUMBER = st.one_of(st.none(), TEXT, st.integers(0, 5).map(str))


@SETTINGS
@given(ips=IPS, rank=NUMBER, count=NUMBER, gpus=NUMBER)
def test_any_skypilot_variables_give_a_plan_or_one_line(ips, rank, count, gpus):
    more = {"SKYPILOT_NODE_IPS": ips}
    for name, value in (("SKYPILOT_NODE_RANK", rank), ("SKYPILOT_NUM_NODES", count),
                        ("SKYPILOT_NUM_GPUS_PER_NODE", gpus)):
        if value is not None:
            more[name] = value
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        code, out, err = main(["plan"], base_env(root, **more), root)
        if ends_well((code, out, err)) is None and not any((v or "").strip() for v in (ips, rank, count)):
            assert json.loads(out)["scheduler"] == "standalone"  # blank is unset (values.get)
        elif ends_well((code, out, err)) is None:
            sane_plan(out, "skypilot")
            listed = [line.strip() for line in ips.splitlines() if line.strip()]
            got = json.loads(out)
            assert int(got["nnodes"]) == len(listed)
            assert got["node_rank"] == int(rank)
            assert got["rdzv_endpoint"] in (f"{listed[0]}:29400", f"[{listed[0]}]:29400")  # IPv6 bracketed
