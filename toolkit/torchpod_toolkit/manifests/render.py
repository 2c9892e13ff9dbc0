"""Files for one JobSpec: YAML for Kubernetes, a batch script for Slurm, PBS and LSF, a
task for SkyPilot. Pure: ``render`` checks the request, builds the job's objects or script
through the renderer its kind's record names, and puts the header (headers.header) on top;
outfiles.write puts the files in place.
"""

from __future__ import annotations

from . import jobs, kube, yamltext
from .headers import header, require_level
from .outfiles import Output
from .shellwords import SHELLCHECK, line, quote
from .spec import JobSpec, check

# without --out prints them on stderr too (printed).
NOTICES = ("# WARNING ", "# Script: ")


def printed(outputs: list[Output]) -> tuple[str, list[str]]:
    """What `invoke manifests` prints without --out: the job's own file alone, which a tool
    can take from a pipe (a Kubernetes kind's one YAML stream, its header as YAML comments,
    for `kubectl apply -f -`, Run:ai's PyTorchJob included; an HPC kind's script, for
    `sbatch`), and the notes for stderr: the header's notices (NOTICES: a warning, a script
    nothing mounts), and each other file (Run:ai's CLI line), which --out DIR writes."""
    first = _job_file(outputs)
    return first.text, notices(outputs) + [f"also {o.name}: written with --out DIR" for o in outputs
                                           if o is not first]


def _job_file(outputs: list[Output]) -> Output:
    return next((o for o in outputs if o.name.endswith(".yaml")), outputs[0])


def notices(outputs: list[Output]) -> list[str]:
    """The job file's header lines a user must see (NOTICES), for stderr: printed whether
    the file goes down a pipe or into --out DIR, never only as a comment."""
    return [line[2:] for line in _job_file(outputs).text.splitlines() if line.startswith(NOTICES)]


def render(spec: JobSpec, piped: bool = False) -> list[Output]:
    """The files for ``spec`` (checked first: bad input raises before anything is built);
    ``piped``: the job's file goes to a pipe, and its Submit line says the stdin form."""
    spec = check(spec)
    kind = jobs.kind(spec.scheduler)
    base = f"{spec.name}.{spec.scheduler}"
    name = f"{base}.{kind.suffix}"
    if not kind.kube:
        return [Output(name, kind.renderer(spec, header(spec, name, piped)))]
    docs = kube.objects(spec)
    require_level(spec, docs)
    out = [Output(name, "\n".join(header(spec, name, piped)) + "\n" + yamltext.dump(docs))]
    if kind.cli:  # a CLI line beside the manifest (a kube.CliLine)
        sh = f"{base}.sh"
        cli: kube.CliLine = kind.cli.target
        # bash: the words may use $'...' quoting (shellwords.quote), which POSIX sh before 2024 lacks
        lines = ["#!/bin/bash", SHELLCHECK, header(spec, sh)[0], header(spec, sh)[-1],
                 *(f"# {note.format(manifest=name)}" for note in cli.notes),
                 "exec " + " \\\n  ".join(_chunks(cli.build(spec)))]
        out.insert(0, Output(sh, "\n".join(lines) + "\n"))
    return out


def _chunks(argv: list[str]) -> list[str]:
    """Flag/value pairs on one line each, for a readable command."""
    i = next((k for k, a in enumerate(argv) if a.startswith("-")), len(argv))
    out = [line(argv[:i])]
    while i < len(argv):
        a = argv[i]
        if a.startswith("-") and a != "--" and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            out.append(line(argv[i:i + 2]))
            i += 2
        elif a == "--":
            out.append(line(argv[i:]))
            break
        else:
            out.append(quote(a))
            i += 1
    return out
