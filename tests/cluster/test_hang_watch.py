"""The hang watch on eight containers as nodes (gloo on CPU), one injected fault per test,
the verdict checked word for word against it: a rank asleep before a collective, a rank
calling another collective, a node frozen (`docker pause`), a node cut off from the
network mid-run (`docker network disconnect`: its link gone, as a dropped cable or a
`tc` rule dropping every packet leaves it), a node throttled (`docker update --cpus`),
named as a straggler while the job still finishes, and a clean job (a first step longer
than half the window, then a steady run) that names nobody. Each verdict comes within the
stall window and 60 s of the fault, and lists every rank that could answer."""

from __future__ import annotations

import re
import textwrap
import time

import pytest

from cluster_helpers import wait_for_log

# eight torch processes each: one at a time beside the tier's other crowded tests
# (tests/cluster/conftest.py's MANY_NODES, tests/crowd.py)
pytestmark = pytest.mark.crowd

NODES, WINDOW, SCRIPT_PATH = 8, 15, "/opt/faults/hang_faults.py"
CULPRIT = 5  # a rank on a node other than node 0, whose agent hosts the job's store
SCRIPT = textwrap.dedent("""\
    import os, socket, sys, time
    from datetime import timedelta
    import torch, torch.distributed as dist

    def load_the_next_batch():
        time.sleep(3600)

    def compute():  # 20 ms of this process's CPU: what a throttle slows (a matmul is too quick)
        start = time.process_time()
        while time.process_time() - start < 0.02:
            pass

    dist.init_process_group("gloo", timeout=timedelta(seconds=900))
    rank, x = dist.get_rank(), torch.ones(10)
    mode, steps, culprit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    print(f"HANGTEST rank {rank} on {socket.gethostname()}", flush=True)
    time.sleep(float(sys.argv[4]))  # the first step: loading data, every rank alike
    for step in range(steps):
        compute()
        time.sleep(0.05)
        dist.all_reduce(x)
        if rank == 0 and step % 10 == 0:
            print(f"HANGTEST step {step}", flush=True)
    if mode == "sleep" and rank == culprit:
        load_the_next_batch()
    if mode == "mismatch" and rank == culprit:
        dist.broadcast(x, src=0)
    else:
        dist.all_reduce(x)
    print(f"HANGTEST rank {rank} done", flush=True)
""")
SLEEP_LINE, BROADCAST_LINE = (SCRIPT.splitlines().index(code) + 1 for code in
                               ("    time.sleep(3600)", "    dist.broadcast(x, src=0)"))


def start(make_cluster, mode: str, steps: int, first_step: float = 0.0):
    files = {i: {SCRIPT_PATH: SCRIPT} for i in range(NODES)}
    cl = make_cluster("volcano", NODES, ["run", SCRIPT_PATH, mode, str(steps), str(CULPRIT), str(first_step)],
                      env={"TORCHPOD_STALL_WINDOW": str(WINDOW)}, node_files=files)
    return cl.start()


def ranks(cl) -> dict[int, tuple[int, str]]:
    """rank -> (node index, hostname), from each node's own line."""
    found = {}
    for run in cl.nodes:
        for rank, host in re.findall(r"HANGTEST rank (\d+) on (\S+)", cl.logs(run.node.index)):
            found[int(rank)] = (run.node.index, host)
    return found


class Said(list):
    """A verdict's lines, shown whole when an assertion fails."""

    def __repr__(self) -> str:
        return "\n" + "\n".join(self)


def verdict(cl, index: int, since: float, limit: float) -> tuple[list[str], float]:
    """The verdict node ``index`` printed, and seconds from ``since`` to when it was seen."""
    deadline = since + limit
    while time.time() < deadline:
        said = [ln for ln in cl.logs(index).splitlines() if ln.startswith("torchpod: hang: ")]
        if any("evidence kept in" in ln for ln in said):
            return Said(said), time.time() - since
        time.sleep(1)
    raise AssertionError(f"no verdict within {limit:.0f} s\n{cl.all_logs()[-12000:]}")


def everyone_running(cl) -> tuple[dict[int, tuple[int, str]], float]:
    wait_for_log(cl, 0, "HANGTEST step 30", timeout=300)  # 1.5 s and more: every rank beat
    found = ranks(cl)
    assert sorted(found) == list(range(NODES)), cl.all_logs()[-8000:]
    return found, time.time()


@pytest.mark.parametrize("fault", ["sleep", "mismatch"])
def test_a_rank_asleep_or_calling_another_collective_is_named_with_its_frame(make_cluster, fault):
    cl = start(make_cluster, fault, 40)
    found, _ = everyone_running(cl)
    since = time.time()
    said, took = verdict(cl, 0, since, WINDOW + 60 + 30)
    host = found[CULPRIT][1]
    seq = "collective 41 (gloo:all_reduce, sizes [[10]])"
    culprit = (f"never entered it; last in collective 40 (gloo:all_reduce, sizes [[10]]); now in "
               f"{SCRIPT_PATH}:{SLEEP_LINE} in load_the_next_batch" if fault == "sleep" else
               f"entered it as gloo:broadcast, sizes [[10]]; now in {SCRIPT_PATH}:{BROADCAST_LINE} in <module>")
    assert said[:3] == [
        f"torchpod: hang: no rank went past {seq} for {WINDOW} s; {NODES - 1} of {NODES} ranks wait in it "
        "(ranks 0-4,6,7)",
        f"torchpod: hang: culprit rank {CULPRIT} on {host}: {culprit}",
        f"torchpod: hang: {NODES} of {NODES} ranks reported their stacks"], cl.all_logs()[-12000:]
    assert took <= WINDOW + 60, f"the verdict took {took:.0f} s"
    assert cl.wait(120) == [124] * NODES, cl.all_logs()[-8000:]
    for index in range(NODES):  # every node printed the same verdict and kept its rank's evidence
        assert [ln for ln in cl.logs(index).splitlines() if ln.startswith("torchpod: hang: ")][:3] == said[:3]


@pytest.mark.parametrize("fault", ["pause", "disconnect"])
def test_a_frozen_or_cut_off_node_is_named_as_not_answering(make_cluster, docker_client, fault):
    cl = start(make_cluster, "steady", 100_000)
    found, _ = everyone_running(cl)
    index, host = found[CULPRIT]
    container = cl.nodes[index].container
    if fault == "pause":
        container.pause()
    else:
        container.reload()
        for network in container.attrs["NetworkSettings"]["Networks"]:
            docker_client.networks.get(network).disconnect(container, force=True)
    since = time.time()
    try:
        said, took = verdict(cl, 0, since, WINDOW + 60 + 60)
    finally:
        if fault == "pause":
            container.unpause()
    assert re.fullmatch(rf"torchpod: hang: no rank went past collective \d+ \(gloo:all_reduce, sizes \[\[10\]\]\) "
                        rf"for {WINDOW} s; {NODES - 1} of {NODES} ranks wait in it( or an earlier one)? "
                        r"\(ranks 0-4,6,7\)", said[0]), said
    # named at the window, before its own beat's grace is over: behind, and silent as long, or,
    # frozen the moment it entered the collective the others wait in, in it and silent
    assert re.fullmatch(rf"torchpod: hang: culprit rank {CULPRIT} on {host}: (never entered it; last in collective "
                        r"\d+( \(gloo:all_reduce, sizes \[\[10\]\]\))?|entered it); did not answer: its beat "
                        r"stopped too \(frozen, or cut off from the store\)", said[1]), said
    assert said[2] == f"torchpod: hang: {NODES - 1} of {NODES} ranks reported their stacks", said
    assert took <= WINDOW + 60, f"the verdict took {took:.0f} s"
    healthy = [i for i in range(NODES) if i != index]
    assert cl.wait(120, indices=healthy) == [124] * (NODES - 1), cl.all_logs()[-8000:]


def test_a_throttled_node_is_named_as_a_straggler_while_the_job_finishes(make_cluster):
    cl = start(make_cluster, "steady", 300)
    found, _ = everyone_running(cl)
    index, host = found[CULPRIT]
    container = cl.nodes[index].container
    container.update(cpu_quota=5_000, cpu_period=100_000)  # --cpus 0.05
    wait_for_log(cl, 0, "torchpod: straggler: ", timeout=180)  # named while it slows the job
    container.update(cpu_quota=-1)  # then given its CPUs back: the job finishes
    assert cl.wait(300) == [0] * NODES, cl.all_logs()[-8000:]
    named = [ln for ln in cl.logs(0).splitlines() if ln.startswith("torchpod: straggler")]
    assert named[-1].startswith("torchpod: straggler over the run (named in "), cl.logs(0)[-6000:]
    for line in named:
        assert re.fullmatch(rf"torchpod: straggler( over the run \(named in \d+ of \d+ stretch(es)?\))?: rank "
                            rf"{CULPRIT} on {host} entered \d+ of \d+ "
                            r"collectives last \(\d+ %\), a median \d+ ms after the first rank; the others "
                            r"wait(ed)? for it", line), line
    assert not any("torchpod: hang: " in cl.logs(i) for i in range(NODES))


def test_a_clean_job_with_a_long_first_step_names_nobody(make_cluster):
    cl = start(make_cluster, "clean", 150, first_step=WINDOW * 0.7)
    assert cl.wait(600) == [0] * NODES, cl.all_logs()[-8000:]
    logs = cl.all_logs()
    assert logs.count("HANGTEST rank") == 2 * NODES, logs[-8000:]  # every rank started and finished
    assert "torchpod: hang: " not in logs and "torchpod: straggler" not in logs, logs[-8000:]
