"""The pods of a JobSet, as the JobSet controller and Kubernetes' Job controller make them. Pure.

JobSet (kubernetes-sigs/jobset v0.12.0, commit f22e565a): per replicated job r and Job
index j a Job ``<js>-<r>-<j>`` (pkg/util/placement GenJobName); the webhook
(pkg/webhooks/jobset_webhook.go Default) makes it Indexed and turns
network.enableDNSHostnames on; the controller (pkg/controllers/jobset_controller.go
constructJob, labelAndAnnotateObject) sets the pod template's subdomain to
network.subdomain, else the JobSet's name (GetSubdomain), and labels and annotates it:
jobset.sigs.k8s.io/jobset-name, jobset-uid, replicatedjob-name, restart-attempt
(Status.Restarts, 0 for a new JobSet), replicatedjob-replicas, global-replicas (the Jobs
over every replicated job), job-index, job-key (sha1 of ``<ns>/<job>``),
job-global-index (the Job's index over the replicated jobs in spec order), group-name
(``default``), group-replicas, job-group-index. Kubernetes' Job controller
(pkg/controller/job/job_controller.go manageJob, indexed_job_utils.go) names each pod
``<job>-<i>-<random>``, sets its hostname ``<job>-<i>``, the annotation and label
batch.kubernetes.io/job-completion-index, and appends JOB_COMPLETION_INDEX (from that
annotation) to each container that has none. The random suffix and the UID are stand-ins
(derived from the name).
"""

from __future__ import annotations

from typing import Mapping, Sequence

from torchpod.errors import InputError

from .common import K8S_ENV, Obj, Pod, last_wins, launcher_args, main_container, node_name, resolve, sha1, uid

# JobSet's names (kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go, pkg/constants).
JOBSET = "jobset.sigs.k8s.io/"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


def _indexed_pods(rjob: Obj, job: str) -> int:
    """How many pods the Indexed Job runs at once: all of its completions, or refused."""
    spec = rjob["template"].get("spec", {})
    mode = spec.get("completionMode", "Indexed")  # JobSet's webhook default
    completions, parallelism = spec.get("completions"), spec.get("parallelism", 1)
    if mode != "Indexed" or completions is None or int(parallelism) != int(completions):
        raise InputError(f"JobSet Job {job}: completionMode {mode!r}, completions {completions!r}, parallelism "
                         f"{parallelism!r} is not modelled; expected an Indexed Job with completions = parallelism "
                         "(every pod of the job running at once)")
    return int(completions)


def _jobset_meta(name: str, ns: str, rjobs: Sequence[Obj], r: int, j: int) -> dict[str, str]:
    """What labelAndAnnotateObject puts on the pod template of Job j of replicated job r,
    as labels and as annotations alike."""
    rjob = rjobs[r]
    group = rjob.get("groupName", "default")
    in_group = [x for x in rjobs if x.get("groupName", "default") == group]
    job = f"{name}-{rjob['name']}-{j}"
    return {f"{JOBSET}jobset-name": name, f"{JOBSET}jobset-uid": uid(name),
            f"{JOBSET}replicatedjob-name": rjob["name"], f"{JOBSET}restart-attempt": "0",
            f"{JOBSET}replicatedjob-replicas": str(rjob.get("replicas", 1)),
            f"{JOBSET}global-replicas": str(sum(int(x.get("replicas", 1)) for x in rjobs)),
            f"{JOBSET}job-index": str(j), f"{JOBSET}job-key": sha1(f"{ns}/{job}"),
            f"{JOBSET}job-global-index": str(sum(int(x.get("replicas", 1)) for x in rjobs[:r]) + j),
            f"{JOBSET}group-name": group,
            f"{JOBSET}group-replicas": str(sum(int(x.get("replicas", 1)) for x in in_group)),
            f"{JOBSET}job-group-index": str(sum(int(x.get("replicas", 1)) for x in in_group[:in_group.index(rjob)])
                                            + j)}


def _jobset_pod(job: str, i: int, ns: str, tmpl: Obj, meta: Mapping[str, str], sub: str | None,
                node: str) -> Pod:
    """Pod ``i`` of the Indexed Job ``job``, as Kubernetes' Job controller creates it."""
    host = f"{job}-{i}"
    labels = {**(tmpl.get("metadata", {}).get("labels") or {}), **meta, COMPLETION_INDEX: str(i),
              "batch.kubernetes.io/job-name": job, "job-name": job}
    annotations = {**(tmpl.get("metadata", {}).get("annotations") or {}), **meta, COMPLETION_INDEX: str(i)}
    pod = f"{host}-{uid(host)[:5]}"  # generateName <job>-<i>-: the suffix is random
    spec = tmpl.get("spec", {})
    hostnet = bool(spec.get("hostNetwork"))
    c = main_container(spec)
    env = list(K8S_ENV) + resolve(c.get("env"), pod, ns, labels, annotations, node)
    if not any(item.get("name") == "JOB_COMPLETION_INDEX" for item in c.get("env") or ()):
        env.append(("JOB_COMPLETION_INDEX", str(i)))
    names = (f"{host}.{sub}", f"{host}.{sub}.{ns}") if sub else ()
    return Pod(name=pod, hostname=node if hostnet else host, dns_names=names, env=last_wins(env),
               args=launcher_args(c), image=c["image"], labels=tuple(labels.items()),
               host_network=hostnet)


def jobset(js: Obj, node_names: Sequence[str] = ()) -> list[Pod]:
    name, ns = js["metadata"]["name"], js["metadata"].get("namespace", "default")
    spec = js["spec"]
    network = spec.get("network") or {}
    # the webhook turns DNS hostnames on unless the JobSet turns them off
    sub = (network.get("subdomain") or name) if network.get("enableDNSHostnames", True) else None
    rjobs = spec["replicatedJobs"]
    pods: list[Pod] = []
    for r, rjob in enumerate(rjobs):
        for j in range(int(rjob.get("replicas", 1))):
            job = f"{name}-{rjob['name']}-{j}"
            meta = _jobset_meta(name, ns, rjobs, r, j)
            for i in range(_indexed_pods(rjob, job)):
                k = len(pods)
                node = node_names[k] if k < len(node_names) else node_name(k)
                pods.append(_jobset_pod(job, i, ns, rjob["template"]["spec"]["template"], meta, sub, node))
    return pods
