"""The pods of a Volcano Job, as Volcano's job controller and its job plugins make them. Pure.

Volcano (volcano-sh/volcano, pkg/controllers/job/plugins/): pods ``<job>-<task>-<i>``
(helpers.MakePodName); ``env`` appends VK_TASK_INDEX and VC_TASK_INDEX (env/env.go);
``svc`` sets hostname = pod name and subdomain = job name, one headless Service named
after the job, and for every task VC_<TASK>_HOSTS (``<pod>.<job>``, comma-separated) and
VC_<TASK>_NUM, task names upper-cased with '-' -> '_', plus /etc/volcano/<task>.host
(svc/svc.go GenerateHosts); ``pytorch`` (distributed-framework/pytorch/pytorch.go) adds
MASTER_ADDR ``<job>-<master>-0.<job>``, MASTER_PORT (--port, else contract.PYTORCHJOB_PORT), WORLD_SIZE (master +
worker replicas) and RANK (master 0, worker i -> i + 1). minAvailable (job and task) is
the gang the scheduler waits for, not the pods: every replica is created and listed; the
admission webhook refuses a job minAvailable above the replicas of all tasks, or a task's
above its replicas (ed72c7c8, pkg/webhooks/admission/jobs/validate/admit_job.go), and so does
the model.
"""

from __future__ import annotations

from typing import Sequence

from torchpod.contract import PYTORCHJOB_PORT
from torchpod.errors import InputError

from .common import K8S_ENV, Obj, Pod, flags, last_wins, launcher_args, main_container, node_name, resolve, uid


def _volcano_admitted(name: str, spec: Obj) -> None:
    """What Volcano's admission webhook refuses about minAvailable (admit_job.go)."""
    total = sum(int(t["replicas"]) for t in spec["tasks"])
    if int(spec.get("minAvailable") or 0) > total:
        raise InputError(f"Volcano Job {name}: minAvailable {spec['minAvailable']} is above the {total} replicas "
                         "of its tasks; expected at most the replicas (the admission webhook refuses it)")
    for t in spec["tasks"]:
        if t.get("minAvailable") is not None and int(t["minAvailable"]) > int(t["replicas"]):
            raise InputError(f"Volcano Job {name}: task {t['name']} minAvailable {t['minAvailable']} is above its "
                             f"{t['replicas']} replicas; expected at most the replicas")


def volcano(job: Obj, node_names: Sequence[str] = ()) -> list[Pod]:
    name, ns = job["metadata"]["name"], job["metadata"].get("namespace", "default")
    spec = job["spec"]
    _volcano_admitted(name, spec)
    plugins = spec.get("plugins") or {}
    tasks = spec["tasks"]
    hosts: dict[str, list[str]] = {}
    for t in tasks:
        tmpl = t["template"].get("spec", {})
        sub = tmpl.get("subdomain") or name
        task = t["name"]
        hosts[task] = [f"{tmpl.get('hostname') or f'{name}-{task}-{i}'}.{sub}" for i in range(t["replicas"])]
    svc_env, files = [], []
    if "svc" in plugins:
        for t in tasks:
            key = t["name"].replace("-", "_")
            svc_env += [(f"VC_{key.upper()}_HOSTS", ",".join(hosts[t["name"]])),
                        (f"VC_{key.upper()}_NUM", str(len(hosts[t["name"]])))]
            files.append((f"/etc/volcano/{key}.host", "\n".join(hosts[t["name"]])))
    torch_flags = flags(plugins.get("pytorch", ())) if "pytorch" in plugins else None
    master_task = (torch_flags or {}).get("master", "master")
    worker_task = (torch_flags or {}).get("worker", "worker")
    pods, k = [], 0
    group = f"{name}-{uid(name)}"  # the PodGroup's name: job name + job UID
    for t in tasks:
        tmpl = t["template"].get("spec", {})
        for i in range(t["replicas"]):
            pod = f"{name}-{t['name']}-{i}"
            labels = {"volcano.sh/job-name": name, "volcano.sh/task-spec": t["name"]}
            annotations = {"scheduling.k8s.io/group-name": group, "volcano.sh/task-index": str(i)}
            hostnet = bool(tmpl.get("hostNetwork"))
            node = node_names[k] if k < len(node_names) else node_name(k)
            c = main_container(tmpl)
            env = list(K8S_ENV) + resolve(c.get("env"), pod, ns, labels, annotations, node)
            if "env" in plugins:
                env += [("VK_TASK_INDEX", str(i)), ("VC_TASK_INDEX", str(i))]
            env += svc_env
            if torch_flags is not None and t["name"] in (master_task, worker_task):
                total = sum(x["replicas"] for x in tasks if x["name"] in (master_task, worker_task))
                env += [("MASTER_ADDR", hosts[master_task][0]),
                        ("MASTER_PORT", torch_flags.get("port", str(PYTORCHJOB_PORT))),
                        ("WORLD_SIZE", str(total)),
                        ("RANK", str(i + 1 if t["name"] == worker_task else 0))]
            listed = hosts[t["name"]][i]
            pods.append(Pod(name=pod, hostname=node if hostnet else (tmpl.get("hostname") or pod),
                            dns_names=(listed,), env=last_wins(env), args=launcher_args(c),
                            image=c["image"], files=tuple(files), labels=tuple(labels.items()),
                            host_network=hostnet))
            k += 1
    return pods
