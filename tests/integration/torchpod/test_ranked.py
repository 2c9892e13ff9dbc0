"""torch's own c10d rendezvous (DynamicRendezvousHandler on a real TCPStore) ranks nodes by
their order key once torchpod.ranked is installed, and by address text without it; then
two real `torchpod.torchrun` processes whose addresses sort against their order."""

from __future__ import annotations

import json
import os
import pickle
import socket
import subprocess
import sys
import threading
from datetime import timedelta

import pytest

from needs import module

N = 12


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def torch_rdzv(monkeypatch):
    """torch's dynamic rendezvous, with its generator put back after the test."""
    dr = module("torch.distributed.elastic.rendezvous.dynamic_rendezvous", "torch (./setup.sh --tests)")
    # every handler here shares one process: no worker store is shared between rounds
    monkeypatch.setenv("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1")
    monkeypatch.setattr(dr.DynamicRendezvousHandler, "_node_desc_generator",
                        dr.DynamicRendezvousHandler._node_desc_generator)
    return dr


def _rendezvous(dr, names, orders, min_nodes=None):
    """One round of ``len(names)`` handlers (threads), each on its own store client; the
    rank each got, in ``names`` order."""
    import torch.distributed as dist

    from torchpod import ranked

    server = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, multi_tenant=True)
    from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import C10dRendezvousBackend

    run_id = f"r{os.getpid()}-{threading.get_ident()}-{len(names)}"
    handlers = []
    for name, order in zip(names, orders):
        store = dist.TCPStore("127.0.0.1", server.port, is_master=False, multi_tenant=True)
        if order is not None:
            assert ranked.install(order) is None
        else:
            dr.DynamicRendezvousHandler._node_desc_generator = dr._NodeDescGenerator()
        handlers.append(dr.DynamicRendezvousHandler.from_backend(
            run_id, store, C10dRendezvousBackend(store, run_id), min_nodes or len(names), len(names),
            local_addr=name, timeout=dr.RendezvousTimeout(join=timedelta(seconds=60))))
    ranks: dict[int, int] = {}

    def join(i: int) -> None:
        ranks[i] = handlers[i].next_rendezvous().rank

    threads = [threading.Thread(target=join, args=(i,)) for i in range(len(names))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    for h in handlers:
        h.shutdown()
    return [ranks.get(i) for i in range(len(names))]


WORKERS = [f"job-worker-{i}.job" for i in range(N)]  # a Volcano job's pods
LWS = ["grp-0.grp"] + [f"grp-0-{i}.grp" for i in range(1, 4)]  # a LeaderWorkerSet group: leader first
IPS = [f"127.0.0.{i}" for i in range(1, N + 1)]


@pytest.mark.parametrize("names", [WORKERS, LWS, IPS], ids=["volcano-pods", "lws-group", "ip-names"])
def test_torch_ranks_by_address_text_and_by_the_order_key_once_installed(torch_rdzv, names):
    plain = _rendezvous(torch_rdzv, names, [None] * len(names))
    assert plain != list(range(len(names))), "these names sort as text in index order: no proof"
    assert plain == [sorted(names).index(n) for n in names]  # torch's own order, as it documents
    assert _rendezvous(torch_rdzv, names, [(i,) for i in range(len(names))]) == list(range(len(names)))


def test_domains_first_then_index(torch_rdzv):
    """Keys (domain, index): nodes of a domain are contiguous, whatever their indexes."""
    domains = [2, 0, 1, 0, 2, 1]
    ranks = _rendezvous(torch_rdzv, [f"n{i}" for i in range(6)], [(d, i) for i, d in enumerate(domains)])
    assert [domains[ranks.index(r)] for r in range(6)] == [0, 0, 1, 1, 2, 2]


def test_a_keyed_descriptor_survives_the_stores_pickle_and_keeps_torchs_identity(torch_rdzv):
    from torchpod.ranked import OrderedNodeDesc

    node = OrderedNodeDesc("job-worker-10.job", 7, 3, (10,))
    back = pickle.loads(pickle.dumps(node))
    assert back == node and hash(back) == hash(node) and back.order == (10,)
    assert repr(back) == "job-worker-10.job_7_3"  # torch's log form
    plain = torch_rdzv._NodeDesc("job-worker-2.job", 1, 1)
    assert sorted([node, plain]) == [plain, node]  # an unkeyed node sorts first, either way round
    assert sorted([plain, node]) == [plain, node]


def test_an_elastic_round_ranks_the_nodes_that_came_in_index_order(torch_rdzv):
    names = WORKERS[:4]
    ranks = _rendezvous(torch_rdzv, names, [(i,) for i in range(4)], min_nodes=2)
    assert ranks == [0, 1, 2, 3]


NODE = """
import json, os, sys
print(json.dumps({k: os.environ.get(k) for k in ("RANK", "GROUP_RANK", "WORLD_SIZE")}), flush=True)
"""


def test_two_torchpod_torchruns_take_the_rank_of_their_order_not_of_their_address(tmp_path):
    """Node 0 advertises 127.0.0.2 and node 1 127.0.0.1: torch alone would make node 1 rank 0."""
    module("torch", "torch (./setup.sh --tests)")
    (tmp_path / "w.py").write_text(NODE)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "TORCHPOD_"))}
    procs = []
    for node, addr in ((0, "127.0.0.2"), (1, "127.0.0.1")):
        cmd = [sys.executable, "-m", "torchpod.torchrun", "--nnodes=2", "--nproc-per-node=1",
               "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=ranked",
               f"--rdzv-conf=is_host={'true' if node == 0 else 'false'},join_timeout=60,torchpod_order={node}",
               f"--local-addr={addr}", str(tmp_path / "w.py")]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=120) for p in procs]
    seen = []
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
        seen.append(json.loads(out.strip().splitlines()[-1]))
    assert [s["GROUP_RANK"] for s in seen] == ["0", "1"] and [s["RANK"] for s in seen] == ["0", "1"], seen


def test_a_bad_order_stops_torchpod_torchrun_in_one_line_before_torch_starts(tmp_path):
    module("torch", "torch (./setup.sh --tests)")
    cmd = [sys.executable, "-m", "torchpod.torchrun", "--nnodes=1", "--rdzv-backend=c10d",
           "--rdzv-endpoint=127.0.0.1:0", "--rdzv-conf=torchpod_order=1..2", str(tmp_path / "w.py")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "torchpod: error: --rdzv-conf torchpod_order='1..2' is not a node order; expected whole numbers "
        "joined by '.' (at most 8, each below 10**9, no leading zeros), e.g. 10 or 2.10"]
