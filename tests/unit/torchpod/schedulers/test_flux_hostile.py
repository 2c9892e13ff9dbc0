"""torchpod.schedulers.flux, hostile: FLUX_JOB_NNODES / FLUX_JOB_SIZE / FLUX_TASK_RANK /
FLUX_TASK_LOCAL_ID holding any text (all of Unicode, control characters, non-ASCII
digits): a plan with one task per node and the user's endpoint, or exactly one line,
through ``cli.main``; never a one-node plan for several nodes, never an endpoint guessed."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from hostile_reads import SETTINGS, TRICKY, base_env, ends_well, main, sane_plan

NUMBER = st.one_of(st.none(), st.text(max_size=12), st.text(alphabet=TRICKY, max_size=6),
                   st.integers(0, 4).map(str))


@SETTINGS
@given(nnodes=NUMBER, size=NUMBER, rank=NUMBER, local=NUMBER, endpoint=st.booleans())
def test_any_flux_variables_give_a_plan_or_one_line(nnodes, size, rank, local, endpoint):
    more = {"FLUX_JOB_ID": "f1"}
    for name, value in (("FLUX_JOB_NNODES", nnodes), ("FLUX_JOB_SIZE", size), ("FLUX_TASK_RANK", rank),
                        ("FLUX_TASK_LOCAL_ID", local)):
        if value is not None:
            more[name] = value
    argv = ["plan", "--rdzv-endpoint", "n0:29400"] if endpoint else ["plan"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        code, out, err = main(argv, base_env(root, **more), root)
        line = ends_well((code, out, err))
        if line is None:
            sane_plan(out, "flux")
            got = json.loads(out)
            count = int(got["nnodes"])
            assert count == int(nnodes) and got["node_rank"] == int(rank) < count
            assert endpoint or count == 1, got  # several nodes need the user's endpoint
            if size is not None and size.strip():
                assert int(size) == count
        elif not endpoint and nnodes and nnodes.strip().isascii() and nnodes.strip().isdigit() \
                and int(nnodes.strip()) > 1:
            assert "FLUX" in line or "rdzv-endpoint" in line, line
