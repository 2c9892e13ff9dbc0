"""The first-job pages' commands, read from the pages and made runnable here.

A page's commands are taken from its code blocks and its kinds table as written; only the
values this machine cannot have are replaced (LOCAL says which and why), so a command
edited on the page is the command the tests run.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from paths import ROOT

KUBERNETES = ROOT / "docs" / "first-job" / "kubernetes.md"
SLURM = ROOT / "docs" / "first-job" / "slurm.md"

# What the tests replace in a page's commands, and why: nothing else is changed.
LOCAL = {
    "image": "the image the nodes run is the one built here (the kubelet stand-in and the Slurm "
             "nodes pull nothing; a push with credentials to a real registry is tests/image/test_push_anywhere.py)",
    "gpus": "-g 0: no GPU here; the job trains on CPUs with gloo",
    "steps": "--steps 2: the same example, fewer steps",
    "namespace": "one namespace per kind, so that the kinds' jobs run side by side on one plane",
    "out": "the -o folder is the test's own",
    "wait": "-w and --timeout=1h: a watch that never returns is run once, a wait for the test's time limit",
}


def blocks(page: Path) -> list[list[str]]:
    """Each fenced code block's commands: continuation lines joined, comments dropped."""
    out = []
    for block in re.findall(r"```\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
        text = block.replace("\\\n", " ")
        out.append([ln.strip() for ln in text.splitlines() if ln.strip()])
    return out


def words(line: str) -> list[str]:
    return shlex.split(line, comments=True)


def command(page: Path, start: tuple[str, ...]) -> list[str]:
    """The one command of the page whose first words are ``start``."""
    found = [words(ln) for b in blocks(page) for ln in b if tuple(words(ln)[:len(start)]) == start]
    assert len(found) == 1, f"{page.name}: {len(found)} commands start with {' '.join(start)}"
    return found[0]


def with_values(argv: list[str], values: dict[str, str]) -> list[str]:
    """``argv`` with the value after each option named in ``values`` replaced."""
    out = list(argv)
    for i, word in enumerate(out[:-1]):
        if word in values:
            out[i + 1] = values[word]
    return out


@dataclass(frozen=True)
class Row:
    """One row of the Kubernetes page's table: the job object, its pods' label, done when."""

    kinds: tuple[str, ...]
    watch: list[str]
    selector: str
    done: str


def table() -> dict[str, Row]:
    """The Kubernetes page's table, by kind."""
    rows = {}
    for line in KUBERNETES.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`"):
            continue
        kinds = tuple(re.findall(r"`([a-z-]+)`", cells[0]))
        (watch,) = re.findall(r"`(kubectl [^`]*)`", cells[1])
        (selector,) = re.findall(r"`-l ([^`]*)`", cells[2])
        row = Row(kinds, words(watch), selector, cells[3])
        rows.update({k: row for k in kinds})
    return rows


def done_command(row: Row, namespace: str, seconds: int) -> list[str] | None:
    """The wait the page shows for the row's "done when": a phase by jsonpath, as step 4
    writes it, or a condition, as its note writes it; None for a kind that never ends."""
    kind = row.watch[row.watch.index("get") + 1]
    phase = re.fullmatch(r"`\.status\.state\.phase` is `(\w+)`", row.done)
    condition = re.fullmatch(r"condition `(\w+)`", row.done)
    if phase:
        step = command(KUBERNETES, ("kubectl", "-n", "ml", "wait", "--for=jsonpath={.status.state.phase}=Completed"))
        step = [w.replace("=Completed", f"={phase.group(1)}") if w.startswith("--for=") else w for w in step]
    elif condition:
        step = ["kubectl", "-n", "ml", "wait", f"--for=condition={condition.group(1)}", f"{kind}/train",
                "--timeout=1h"]
        note = re.search(r"`(kubectl -n ml wait --for=condition=[^`]*)`", KUBERNETES.read_text(encoding="utf-8"))
        assert note and words(note.group(1))[:4] == step[:4], "the page's note on waiting for a condition changed"
    else:
        return None
    step = [f"{kind}/train" if "/" in w and not w.startswith("-") else w for w in step]
    return with_values([w if not w.startswith("--timeout=") else f"--timeout={seconds}s" for w in step],
                       {"-n": namespace})


# --- the Kubernetes page on the real control plane -----------------------------------------

@dataclass
class KubeJob:
    kind: str
    namespace: str
    path: Path  # the rendered job file
    row: Row


def _kubectl_env(cluster) -> dict[str, str]:
    import os

    return {**os.environ, "KUBECONFIG": str(cluster.kube.plane.kubeconfig),
            "PATH": f"{cluster.kube.plan.bindir}:{os.environ['PATH']}"}


def _run(argv: list[str], env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)


def _ok(argv: list[str], env: dict[str, str], timeout: float = 120) -> str:
    done = _run(argv, env, timeout)
    assert done.returncode == 0, f"{shlex.join(argv)} exited {done.returncode}: {done.stderr[-2000:]}"
    return done.stdout


def submit_page(cluster, kind: str, folder: Path, by_submit: bool = False, image: str = "") -> KubeJob:
    """Steps 1 and 2 of the Kubernetes page for ``kind``: render (with --submit where
    ``by_submit``, as the page's "in one step" says), then the namespace, its Pod Security
    level (the one the header states) and the apply. ``image``: the cluster's unless named."""
    import sys

    env = _kubectl_env(cluster)
    namespace, out = f"ml-{kind}", folder / kind
    render = with_values(command(KUBERNETES, ("invoke", "manifests")),
                         {"-s": kind, "-g": "0", "-i": image or cluster.image, "--namespace": namespace, "-o": str(out),
                          "--steps": "2"})
    if by_submit:
        render.insert(render.index("--"), "--submit")
    (create,) = [words(ln) for b in blocks(KUBERNETES) for ln in b if ln.startswith("kubectl create namespace")]
    _ok([w if w != "ml" else namespace for w in create], env)
    # the level the header states: read from this render (with --submit, from the same render
    # made into a folder of its own first, as a user reads the header before submitting)
    first = with_values(render, {"-o": str(folder / f"{kind}-header")}) if by_submit else render
    _ok([sys.executable, "-m", "invoke", *[w for w in first if w != "--submit"][1:]], env)
    header = (folder / f"{kind}-header" if by_submit else out) / f"train.{kind}.yaml"
    level = re.search(r"^# Pod Security: namespace level '([a-z]+)'", header.read_text(), re.M)
    assert level, header.read_text()[:800]
    label = command(KUBERNETES, ("kubectl", "label", "namespace"))
    _ok([f"pod-security.kubernetes.io/enforce={level.group(1)}" if w.startswith("pod-security.kubernetes.io/enforce=")
         else namespace if w == "ml" else w for w in label], env)
    path = out / f"train.{kind}.yaml"
    if by_submit:
        said = _ok([sys.executable, "-m", "invoke", *render[1:]], env, timeout=180)
        assert f"submitted: {namespace}/train" in said and "watch: kubectl" in said, said
    else:
        apply = command(KUBERNETES, ("kubectl", "apply", "-f"))
        _ok([str(path) if w.startswith("job/") else w for w in apply], env)
    return KubeJob(kind, namespace, path, table()[kind])


def watch_page(cluster, job: KubeJob) -> None:
    """Step 3: the table's watch (once, without -w) names the job; its pods' label selects them."""
    env = _kubectl_env(cluster)
    watch = [w for w in job.row.watch if w != "-w"]
    seen = _ok(with_values(watch, {"-n": job.namespace}), env)
    assert re.search(r"^train\s", seen, re.M), seen
    pods = with_values(command(KUBERNETES, ("kubectl", "-n", "ml", "get", "pods", "-l")),
                       {"-n": job.namespace, "-l": job.row.selector})
    pods = [w for w in pods if w != "-w"]
    # the operator makes the pods after the apply: watched until they are there, as -w would
    deadline = time.monotonic() + 120
    while not re.search(r"^train-", listed := _ok(pods, env), re.M) and time.monotonic() < deadline:
        time.sleep(1)
    assert re.search(r"^train-", listed, re.M), f"{shlex.join(pods)} listed no pod of the job: {listed!r}"


def wait_page(cluster, job: KubeJob, seconds: int) -> None:
    """Step 4's wait, in the form the table's "done when" takes."""
    step = done_command(job.row, job.namespace, seconds)
    assert step is not None, f"{job.kind} never ends; the page says so"
    _ok(step, _kubectl_env(cluster), timeout=seconds + 30)


def results_page(cluster, job: KubeJob, churn: bool = False) -> list[dict]:
    """Step 4's logs line (its grep done here): every TORCHPOD_RESULT line the pods printed.
    ``churn``: the job's pods come and go (an LWS group is recreated after each run), so a
    pod listed and gone before its log is read is no failure: nothing is read this time."""
    import json

    logs = command(KUBERNETES, ("kubectl", "-n", "ml", "logs", "-l"))
    logs = with_values(logs[:logs.index("|")], {"-n": job.namespace, "-l": job.row.selector})
    done = _run(logs, _kubectl_env(cluster))
    if churn and done.returncode != 0:
        return []
    assert done.returncode == 0, f"{shlex.join(logs)} exited {done.returncode}: {done.stderr[-2000:]}"
    return [json.loads(ln.split(" ", 1)[1]) for ln in done.stdout.splitlines() if ln.startswith("TORCHPOD_RESULT")]


def cancel_page(cluster, job: KubeJob) -> None:
    """Step 5: the delete of the job object, as the table names it."""
    kind = job.row.watch[job.row.watch.index("get") + 1]
    delete = command(KUBERNETES, ("kubectl", "-n", "ml", "delete"))
    _ok([kind if w == "jobs.batch.volcano.sh" else job.namespace if w == "ml" else w for w in delete],
        _kubectl_env(cluster))


# --- the Slurm page on the real Slurm cluster ---------------------------------------------------

def slurm_render(image: str, partition: str, out: Path) -> list[str]:
    """Step 1's render with the values this cluster has (LOCAL): the image its nodes are,
    which they run as their own environment (--runtime none), its partition, no GPUs."""
    render = with_values(command(SLURM, ("invoke", "manifests")),
                         {"-i": image, "--queue": partition, "-g": "0", "-o": str(out), "--steps": "2"})
    render.insert(render.index("--"), "--runtime")
    render.insert(render.index("--"), "none")
    return render


def slurm_step(start: tuple[str, ...], jobid: str) -> list[str]:
    """A page command that names the job (JOBID, train-JOBID.out) with this job's id."""
    return [w.replace("JOBID", jobid) for w in command(SLURM, start)]
