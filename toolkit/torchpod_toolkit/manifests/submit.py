"""`invoke manifests --submit`: run the kind's own submitter on the file just written, say
the job's id and the command that watches it, and end with the submitter's exit status.

The submitter is the one the header's Submit line names, as each kind declares it
(kinds/record.py): where it reads the file from standard input (``piped``: ``kubectl apply
-f -``, ``sbatch``, ``qsub``, ``bsub``) the file is handed to it that way; else it is named
after ``submit_flags`` (``sky launch --yes --cluster NAME FILE``). It runs in the folder
the file was written to, the submit directory an HPC job's nodes share, with the caller's
environment (KUBECONFIG, the batch system's settings, the registry login). Every argument is
a list element: nothing a user typed reaches a shell.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from torchpod.errors import RuntimeFailure

from . import jobs
from .spec import JobSpec


@dataclass(frozen=True)
class Submission:
    argv: list[str]
    stdin: Path | None  # the file on the submitter's standard input, or None (named in argv)


def submission(kind: jobs.JobKind, spec: JobSpec, path: Path) -> Submission:
    """The submitter's argv for the file at ``path`` (its name: the submitter runs beside it)."""
    if kind.piped:
        return Submission(shlex.split(kind.piped), path)
    flags = shlex.split(kind.submit_flags.format(name=spec.name))
    return Submission([*shlex.split(kind.submit), *flags, path.name], None)


def job_id(kind: jobs.JobKind, spec: JobSpec, output: str) -> str | None:
    """The id the submitter gave the job (its ``submitted`` pattern), or the job's own name
    for a kind that names it itself; None when the output holds no id."""
    if not kind.submitted:
        return f"{spec.namespace}/{spec.name}" if kind.kube else spec.name
    found = re.search(kind.submitted, output, re.MULTILINE)
    return found.group("id") if found else None


def watch_line(kind: jobs.JobKind, spec: JobSpec, ident: str) -> str:
    return kind.watch.format(id=shlex.quote(ident), name=spec.name, namespace=spec.namespace)


def submit(spec: JobSpec, path: Path, env: Mapping[str, str] | None = None) -> int:
    """Submit the written file ``path``; print the job's id and its watch command; the
    submitter's exit status. A submitter not on PATH is one line (RuntimeFailure)."""
    kind = jobs.kind(spec.scheduler)
    how = submission(kind, spec, path)
    tool = how.argv[0]
    if shutil.which(tool, path=(env or {}).get("PATH")) is None:
        raise RuntimeFailure(f"--submit: {tool} is not on PATH; the job is written to {path}: submit it where "
                             f"{tool} runs ({kind.submit} {path.name})")
    print(f"==> {shlex.join(how.argv)}{' < ' + path.name if how.stdin else ''}   (in {path.parent})", flush=True)
    with (how.stdin.open("rb") if how.stdin else open("/dev/null", "rb")) as stdin:
        proc = subprocess.run(how.argv, cwd=path.parent, stdin=stdin, capture_output=True, text=True,
                              env=None if env is None else dict(env))
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    if proc.returncode != 0:
        print(f"torchpod: {tool} exited {proc.returncode}: the job was not submitted", file=sys.stderr)
        return proc.returncode
    ident = job_id(kind, spec, proc.stdout)
    if ident is None:
        print(f"torchpod: {tool} printed no job id ({kind.submitted!r}); check its output above", file=sys.stderr)
        return 1
    print(f"submitted: {ident}")
    print(f"watch: {watch_line(kind, spec, ident)}")
    return 0


__all__ = ["Submission", "job_id", "submission", "submit", "watch_line"]
