"""torchpod.rendezvous: the join timeout of a c10d rendezvous of N nodes, torch's own below
the size where it stops holding, the keep-alive settings left as torch's, and what `plan`
says of them."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

import torchpod.cli as cli
from torchpod import rendezvous


@pytest.mark.parametrize("nodes, join", [
    (1, 600), (2, 600), (256, 600), (937, 600),  # torch's default: nothing added to --rdzv-conf
    (938, 601), (1024, 628), (4096, 1611),  # the start spread and two rendezvous outgrow torch's 600 s
])
def test_the_join_timeout_grows_with_the_nodes_from_torchs_default(nodes, join):
    chosen = rendezvous.settings(nodes)
    assert chosen.join_s == join
    assert chosen.conf == ({"join_timeout": str(join)} if join != 600 else {})
    assert f"join {join} s" in chosen.why and f"a rendezvous of {nodes} node{'s' if nodes > 1 else ''} " in chosen.why


@given(st.integers(min_value=-10, max_value=10**19))
def test_any_node_count_gives_a_timeout_that_never_shrinks_stays_bounded_and_lets_a_late_node_join(nodes):
    chosen, more = rendezvous.settings(nodes), rendezvous.settings(nodes + 1)
    assert 600 <= chosen.join_s <= more.join_s <= rendezvous.settings(rendezvous.MAX_NODES).join_s < 86_400
    # the last node, START_SPREAD_S late, still has the rendezvous's own time left twice over
    assert chosen.join_s >= rendezvous.START_SPREAD_S + 2 * rendezvous.PER_NODE_S * chosen.nodes
    assert set(chosen.conf) <= {"join_timeout"}  # the keep-alive settings stay torch's


def plan(env: dict, capsys, *args: str) -> dict:
    assert cli.main(["plan", "--format=json", *args, "--", "train.py"], env) == 0
    return json.loads(capsys.readouterr().out)


JOB = {"PET_NNODES": "1024", "PET_RDZV_ENDPOINT": "head:29400", "TORCHPOD_HOSTNAME": "node-1"}


def test_a_large_job_gets_torchpods_timeouts_and_the_plan_says_why(capsys):
    data = plan(JOB, capsys)
    assert data["rdzv_conf"]["join_timeout"] == "628" and "heartbeat_timeout" not in data["rdzv_conf"]
    assert any(a.startswith("--rdzv-conf=") and "join_timeout=628" in a for a in data["torchrun_args"])
    timeouts = data["rdzv_timeouts"]
    assert (timeouts["join_timeout"], timeouts["heartbeat_timeout"], timeouts["keep_alive_interval"]) == \
        ("628", "5", "5")
    assert timeouts["why"].startswith("join 628 s: the nodes' start spread (300 s)")
    assert any(n.startswith("rendezvous timeout for up to 1024 nodes: join 628 s") for n in data["notes"])


def test_a_small_job_keeps_torchs_defaults_and_adds_nothing(capsys):
    data = plan({**JOB, "PET_NNODES": "900"}, capsys)
    assert "join_timeout" not in data["rdzv_conf"] and "heartbeat_timeout" not in data["rdzv_conf"]
    assert (data["rdzv_timeouts"]["join_timeout"], data["rdzv_timeouts"]["heartbeat_timeout"]) == ("600", "5")
    assert data["rdzv_timeouts"]["why"].startswith("join 600 s")
    assert not any("rendezvous timeout" in n for n in data["notes"])


def test_an_elastic_job_is_timed_for_its_most_nodes(capsys):
    data = plan({**JOB, "PET_NNODES": "2:1024"}, capsys)
    assert data["rdzv_conf"]["join_timeout"] == "628"


def test_the_users_timeouts_win_and_the_plan_says_whose_they_are(capsys):
    data = plan({**JOB, "TORCHPOD_RDZV_TIMEOUT": "900"}, capsys, "--rdzv-conf", "heartbeat_timeout=30")
    assert (data["rdzv_conf"]["join_timeout"], data["rdzv_conf"]["heartbeat_timeout"]) == ("900", "30")
    assert data["rdzv_timeouts"]["why"].startswith("set by TORCHPOD_RDZV_TIMEOUT or --rdzv-conf; for up to 1024")
    assert not any("rendezvous timeout" in n for n in data["notes"])


def test_the_users_keep_alive_interval_is_what_the_plan_says_the_handler_uses(capsys):
    data = plan(JOB, capsys, "--rdzv-conf", "keep_alive_interval=20")
    assert data["rdzv_conf"]["keep_alive_interval"] == "20"
    assert data["rdzv_timeouts"]["keep_alive_interval"] == "20"


def test_a_backend_that_reads_neither_timeout_gets_none(capsys):
    data = plan({**JOB, "PET_NODE_RANK": "1"}, capsys, "--rdzv-backend", "static")
    assert data["rdzv_timeouts"] is None
    assert "heartbeat_timeout" not in data["rdzv_conf"] and data["rdzv_conf"].get("join_timeout") is None
