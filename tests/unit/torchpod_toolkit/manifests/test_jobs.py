"""manifests/jobs.py: the one table of job kinds, checked against the launcher's detectors,
the harness's scenarios, the operator models and the renderers; JobSpec's options declared
once (flags, defaults, help, the Regenerate line and its parser); one record per runtime."""

from __future__ import annotations

import importlib.util
import inspect
from dataclasses import fields

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchpod import schedulers
from torchpod.errors import InputError
from torchpod.resolve import resolve
from torchpod.schedulers.common import Facts
from torchpod.torchrun_flags import split_command_line
from torchpod_toolkit.cluster import scenarios, topology
from torchpod_toolkit.cluster.nodes import fill_ips
from torchpod_toolkit.manifests import headers, hpc, jobs, kube, operators, regenerate, render, runtimes
from torchpod_toolkit.manifests import spec as spec_mod
from torchpod_toolkit.manifests.spec import JobSpec, check

from paths import ROOT

IMAGE = "registry.example.com/torchpod/pytorch:2.13.0-cuda13.0"
KINDS = [pytest.param(k, id=k.name) for k in jobs.KINDS]


def _plans(topo, tmp_path):
    plans = []
    for node in topo.nodes:
        env = dict(node.env)
        for path, text in node.files:  # PBS_NODEFILE under a temp root
            target = tmp_path / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            env = {k: (str(target) if v == path else v) for k, v in env.items()}
        env = {k: fill_ips(v, [f"10.0.0.{10 + i}" for i in range(len(topo.nodes))]) for k, v in env.items()}
        env["CUDA_VISIBLE_DEVICES"] = ""
        plans.append(resolve(env, Facts(hostname=node.hostname), split_command_line([*node.options, "x.py"])))
    return plans


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_runs_in_the_harness_as_its_detector_on_its_port(kind, tmp_path):
    assert kind.detector in schedulers.NAMES
    scenario = scenarios.SCENARIOS[kind.scenario]
    assert scenario.detector == kind.detector
    topo = topology.build(kind.scenario, 2, "job-1")
    plans = _plans(topo, tmp_path)
    assert {p.scheduler for p in plans} == {kind.detector} == {topo.scheduler}
    assert {p.rdzv_endpoint.port for p in plans} == {kind.port}


@pytest.mark.parametrize("kind", [k for k in KINDS if k.values[0].kube])
def test_a_kube_kinds_manifest_is_its_operator_model(kind):
    request = check(JobSpec(kind.name, 2, IMAGE, ("train.py",)))
    job = operators.job_object(kube.objects(request))
    assert operators.MODELS[(job["apiVersion"], job["kind"])] is kind.model
    pods = operators.pods(kube.objects(request))
    assert jobs.of_pods(kind.model, {k for k, _ in pods[0].env}).detector == kind.detector
    header = headers.header(request, "f.yaml")
    assert f"# Submit: {kind.submit} f.yaml   (needs {kind.requires})" in header
    assert f"port {kind.port};" in "\n".join(header)


@pytest.mark.parametrize("kind", [k for k in KINDS if not k.values[0].kube])
def test_an_hpc_kind_renders_its_script(kind):
    (out,) = render.render(JobSpec(kind.name, 2, IMAGE, ("train.py",)))
    assert out.name == f"train.{kind.name}.{kind.suffix}"
    assert f"# Submit: {kind.submit} {out.name}" in out.text and f"port {kind.port};" in out.text
    assert kind.model is None and kind.requires is None


def test_the_table_is_what_every_user_lists():
    assert spec_mod.SCHEDULERS == jobs.NAMES == tuple(k.name for k in jobs.KINDS)
    assert set(spec_mod.KUBE) | set(spec_mod.HPC) == set(jobs.NAMES) and not set(spec_mod.KUBE) & set(spec_mod.HPC)
    assert {k.scenario for k in jobs.KINDS} <= set(scenarios.SCENARIOS)
    # every record names a function of the renderer module of its sort, which its name finds
    assert {k.renderer.module for k in jobs.KINDS if not k.kube} == {"hpc"}
    assert {k.renderer.module for k in jobs.KINDS if k.kube} == {"kube"}
    assert all(callable(k.renderer.target) and k.renderer.target is getattr(hpc if k.renderer.module == "hpc"
                                                                             else kube, k.renderer.name)
               for k in jobs.KINDS)
    assert {k.model for k in jobs.KINDS if k.kube} == set(operators.MODELS.values())
    # a CLI line beside a manifest is a Kubernetes kind's, and every CLI line is some kind's
    assert all(k.kube and isinstance(k.cli.target, kube.CliLine) for k in jobs.KINDS if k.cli)
    # a batch kind says what its system hands each node (the harness plays it); a Kubernetes one has pods instead
    assert all(k.nodes for k in jobs.KINDS if not k.kube) and not [k.name for k in jobs.KINDS if k.kube and k.nodes]
    # what only a batch script or a Kubernetes pod can say sits on a record of that sort
    assert not [k.name for k in jobs.KINDS if k.kube and (k.mpiexec or k.shared_dir or k.shared_writes)]
    assert not [k.name for k in jobs.KINDS if not k.kube and (k.master_task or k.no_hostnetwork or k.last_pod
                                                          or k.no_kube_harness)]
    # the batch system the harness runs for real is Slurm's (cluster/slurm.py): a kind that says so
    # renders a batch script of sbatch directives, which its slurmctld takes
    real = [k for k in jobs.KINDS if k.real_batch_system]
    assert real and not [k.name for k in real if k.kube]
    for k in real:
        (script,) = render.render(JobSpec(k.name, 2, "registry.example.com/t:1", ("t.py",), gpus_per_node=0))
        assert "\n#SBATCH --nodes=2" in script.text, script.text[:400]
    # the harness's scenarios that no job renders are conventions with detectors of their own
    assert {s.detector for n, s in scenarios.SCENARIOS.items() if n not in jobs.NAMES} <= set(schedulers.NAMES)


def test_every_kube_kind_is_rendered():
    for name in jobs.KUBE:
        assert kube.objects(check(JobSpec(name, 2, IMAGE, ("t.py",))))


def test_a_manifest_maps_to_the_detector_by_its_operator_and_marker():
    plain = check(JobSpec("kubeflow", 2, IMAGE, ("t.py",)))
    runai = check(JobSpec("runai", 2, IMAGE, ("t.py",)))
    assert topology.from_manifest(kube.objects(plain)).scheduler == "kubeflow"
    assert topology.from_manifest(kube.objects(runai)).scheduler == "runai"
    assert topology.from_manifest(kube.objects(check(JobSpec("trainer", 2, IMAGE, ("t.py",))))).scheduler == "kubeflow"
    assert topology.from_manifest(kube.objects(check(JobSpec("volcano-master", 2, IMAGE, ("t.py",))))).scheduler \
        == "volcano"


@pytest.mark.parametrize("name", ["cobalt", "", "Slurm", "slurm\n", "volcano\x00"])
def test_an_unknown_kind_is_one_error_naming_the_flag(name):
    with pytest.raises(InputError, match=r"--scheduler=.* is unknown; expected one of volcano, "):
        jobs.kind(name)
    with pytest.raises(InputError, match="--scheduler="):
        check(JobSpec(name, 2, IMAGE, ("t.py",)))


def test_choices_reads_as_a_list():
    assert jobs.choices(("a",)) == "a" and jobs.choices(("a", "b", "c")) == "a, b or c"


# --- JobSpec options, declared once ---------------------------------------------------
def _tasks_module():
    spec = importlib.util.spec_from_file_location("tasks_under_test", ROOT / "tasks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_field_but_the_command_is_an_option():
    # explicit: which options were typed with their default's value (the task fills it)
    names = [f.name for f in fields(JobSpec) if f.name != "explicit"]
    spans = {how.span for _, how in spec_mod.options() if how.span}  # set by their option's MIN:MAX
    assert spans == {"min_nodes"}
    assert [n for n, _ in spec_mod.options()] == [n for n in names if n != "command" and n not in spans]
    assert spec_mod.required() == ("scheduler", "nodes", "image")


def test_the_manifests_task_is_generated_from_the_options():
    task = _tasks_module().manifests
    params = inspect.signature(task.body).parameters
    names = list(params)[1:]
    assert names[:len(spec_mod.options())] == [n for n, _ in spec_mod.options()]
    assert names[len(spec_mod.options()):] == ["out", "refresh", "force", "submit"]
    for name, default, text in spec_mod.cli_options():  # the help is the option's, its default said
        assert params[name].default == default and task.help[name].startswith(text)
        assert task.help[name] == text or task.help[name] == f"{text} (default: {default})"
    assert task.help["scheduler"] == jobs.choices()
    assert params["nodes"].default == "2" and params["gpus_per_node"].default == "8"


def test_the_parser_knows_every_flag_and_no_other():
    parser = regenerate._parser()
    flags = {o for a in parser._actions for o in a.option_strings}
    assert flags == {spec_mod.flag(n) for n, _ in spec_mod.options()}
    with pytest.raises(InputError, match="unrecognized arguments"):
        regenerate.parse_invoke_line(
            f"invoke manifests --scheduler slurm --nodes 2 --image {IMAGE} --command x -- t.py")


@pytest.mark.parametrize("missing", ["scheduler", "nodes", "image"])
def test_a_regenerate_line_without_a_required_option_is_refused(missing):
    given = {"scheduler": "slurm", "nodes": "2", "image": IMAGE}
    del given[missing]
    line = "invoke manifests " + " ".join(f"--{k} {v}" for k, v in given.items()) + " -- t.py"
    with pytest.raises(InputError, match=f"the line has no --{missing};"):
        regenerate.parse_invoke_line(line)


_TEXT = {"queue": "gpu", "walltime": "02:00:00", "project": "team-b", "namespace": "ml"}


@settings(deadline=None, max_examples=60)
@given(kind=st.sampled_from(jobs.NAMES), nodes=st.integers(2, 9), gpus=st.integers(0, 8),
       extra=st.dictionaries(st.sampled_from(sorted(_TEXT)), st.booleans()),
       command=st.lists(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), min_size=1),
                        min_size=1, max_size=3))
def test_the_regenerate_line_round_trips_through_its_parser(kind, nodes, gpus, extra, command):
    kinds = {name: how.kinds for name, how in spec_mod.options()}
    chosen = {k: _TEXT[k] for k, on in extra.items() if on and (kinds[k] is None or kind in kinds[k])}
    spec = check(JobSpec(kind, nodes, IMAGE, tuple(command), gpus_per_node=gpus, **chosen))
    line = regenerate.invoke_line(spec)
    assert check(regenerate.parse_invoke_line(line)) == spec
    for name, how in spec_mod.options():  # only the flags the job needs: defaults and other kinds' left out
        if how.only is not None and not how.only(spec):
            assert f" {spec_mod.flag(name)} " not in line.split(" -- ")[0] + " "


# --- container runtimes -------------------------------------------------------------
def test_one_record_per_runtime():
    assert spec_mod.RUNTIMES == tuple(runtimes.RUNTIMES) == ("apptainer", "enroot", "podman", "docker", "none")
    assert all(name == r.name for name, r in runtimes.RUNTIMES.items())
    assert check(JobSpec("slurm", 2, IMAGE, ("t.py",))).runtime == runtimes.DEFAULT_RUNTIME
    assert check(JobSpec("volcano", 2, IMAGE, ("t.py",))).runtime == "none"


@pytest.mark.parametrize("kind, runtime",
                         [(k, r) for k in jobs.HPC for r in jobs.kind(k).runtimes or runtimes.RUNTIMES])
def test_every_runtime_starts_torchpod_under_every_batch_system(kind, runtime):
    (out,) = render.render(JobSpec(kind, 2, IMAGE, ("train.py",), runtime=runtime))
    lines = out.text.rstrip("\n").splitlines()
    if kind == "pbs":  # pbsdsh returns 0 whatever its tasks did: the script checks their statuses last
        assert lines[-len(hpc.PBSDSH_CHECK):] == list(hpc.PBSDSH_CHECK)
        lines = lines[:-len(hpc.PBSDSH_CHECK)]
    last = lines[-1]
    assert "train.py" in last and ("torchpod" in last or runtime in ("enroot", "podman", "docker"))
    assert f"(container runtime: {runtime}" in out.text


@pytest.mark.parametrize("kind", [k.name for k in jobs.KINDS if k.runtimes])
def test_a_kind_that_runs_the_image_itself_takes_only_its_runtimes(kind):
    allowed = jobs.kind(kind).runtimes
    assert check(JobSpec(kind, 2, IMAGE, ("t.py",))).runtime == allowed[0]
    for runtime in set(runtimes.RUNTIMES) - set(allowed):
        with pytest.raises(InputError, match=f"--runtime={runtime} with --scheduler {kind}, which runs the image"):
            check(JobSpec(kind, 2, IMAGE, ("t.py",), runtime=runtime))


def test_an_unknown_runtime_is_one_error_naming_the_flag():
    with pytest.raises(InputError, match=r"--runtime='singularity' is unknown; expected one of apptainer, "):
        check(JobSpec("slurm", 2, IMAGE, ("t.py",), runtime="singularity"))


def test_the_header_says_how_torch_will_rank_the_nodes_for_every_kind_and_rendezvous():
    for kind in jobs.KINDS:
        for rdzv in ({}, {"rdzv": "etcd", "etcd_endpoint": "etcd.example.com:2379"}):
            request = check(JobSpec(kind.name, 2, IMAGE, ("train.py",), **rdzv))
            (line,) = [ln for ln in headers.header(request, "f") if ln.startswith("# Ranks: ")]
            assert "node index (torchpod orders the rendezvous" in line, (kind.name, line)
            assert ("switch path" in line) is bool(kind.rank_domains), (kind.name, line)
    for kind in (k for k in jobs.KINDS if k.node_range):
        request = check(JobSpec(kind.name, 4, IMAGE, ("train.py",), min_nodes=2))
        (line,) = [ln for ln in headers.header(request, "f") if ln.startswith("# Ranks: ")]
        assert line.startswith("# Ranks: each round ranks the nodes that joined by node index"), (kind.name, line)


def _bounds(doc: dict) -> dict[str, object]:
    """Where a rendered Kubernetes job object bounds its restarts, as the header names them."""
    spec = doc["spec"]
    found: dict[str, object] = {}
    if doc["kind"] == "PyTorchJob":
        found["runPolicy.backoffLimit"] = spec.get("runPolicy", {}).get("backoffLimit")
        found["restartPolicy"] = {r["restartPolicy"] for r in spec["pytorchReplicaSpecs"].values()}
    elif doc["kind"] == "JobSet":
        found["failurePolicy.maxRestarts"] = spec.get("failurePolicy", {}).get("maxRestarts")
        found["backoffLimit"] = {r["template"]["spec"]["backoffLimit"] for r in spec["replicatedJobs"]}
    elif doc["kind"] == "Job" and doc["apiVersion"].startswith("batch.volcano.sh"):
        found["maxRetry"] = spec.get("maxRetry")
        found["restartPolicy"] = {t["template"]["spec"]["restartPolicy"] for t in spec["tasks"]}
        found["policies"] = [(p["event"], p["action"]) for p in spec.get("policies", [])]
    return found


@pytest.mark.parametrize("kind", [k.name for k in jobs.KINDS])
def test_every_kind_states_how_its_restarts_end_and_its_object_holds_that_bound(kind):
    import yaml

    record = jobs.kind(kind)
    request = check(JobSpec(kind, 2, IMAGE, ("train.py",)))
    (line,) = [ln for ln in headers.header(request, "f") if ln.startswith("# Restarts: ")]
    assert "{n}" not in line and len(line) < 400, line
    if not record.kube:
        assert line.startswith("# Restarts: none: a non-zero exit ends the job") or "runs the task once" in line
        return
    (out,) = [o for o in render.render(request) if o.name.endswith(".yaml")]
    (doc,) = [d for d in yaml.safe_load_all(out.text) if d and d["kind"] in ("PyTorchJob", "JobSet", "Job",
                                                                              "TrainJob", "LeaderWorkerSet")]
    bounds = _bounds(doc)
    n = jobs.RESTARTS
    if doc["kind"] == "PyTorchJob":
        assert bounds == {"runPolicy.backoffLimit": n, "restartPolicy": {"OnFailure"}}, bounds
        assert f"restarted {n} times in all (runPolicy.backoffLimit), then the PyTorchJob is Failed" in line
    elif doc["kind"] == "JobSet":
        assert bounds == {"failurePolicy.maxRestarts": n, "backoffLimit": {0}}, bounds
        assert f"at most {n} times (failurePolicy.maxRestarts), then the JobSet is Failed" in line
    elif doc["kind"] == "Job":  # Volcano's: a failed pod must reach Failed for maxRetry to count
        assert bounds["maxRetry"] == n and bounds["restartPolicy"] == {"Never"}, bounds
        assert ("PodFailed", "RestartJob") in bounds["policies"], bounds
        assert f"at most {n} times (maxRetry), then the Job is Failed" in line
    elif doc["kind"] == "TrainJob":  # the runtime's Job: Kubernetes' default backoffLimit, said as such
        assert "6 failures" in line and "then the TrainJob is Failed" in line
    else:  # a LeaderWorkerSet has no failed state: said, with what to use instead
        assert doc["spec"]["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart"
        assert line.startswith("# Restarts: without bound") and "(-s jobset)" in line


def test_an_elastic_volcano_job_is_bounded_too_its_failed_pods_stay_failed():
    """No RestartJob policy (a lost node must not restart the others), but pods that restart
    Never: a pod whose launcher fails stays Failed and the Job ends once every pod has."""
    import yaml

    request = check(JobSpec("volcano", 4, IMAGE, ("train.py",), min_nodes=2))
    (line,) = [ln for ln in headers.header(request, "f") if ln.startswith("# Restarts: ")]
    assert "without bound" not in line and f"at most {jobs.RESTARTS} times (PET_MAX_RESTARTS)" in line, line
    (job,) = [d for d in yaml.safe_load_all(render.render(request)[0].text) if d and d["kind"] == "Job"]
    assert "policies" not in job["spec"], job["spec"]
    assert {t["template"]["spec"]["restartPolicy"] for t in job["spec"]["tasks"]} == {"Never"}
