"""Files for one JobSpec: YAML for Kubernetes, a batch script for Slurm and PBS. Pure,
except ``write``, which puts rendered files in place.

Every file starts with comments that say how to submit it, what it needs from the cluster
(operator, Pod Security level, RDMA), which rendezvous it uses and the `invoke manifests`
line that regenerates it. A comment holds only values spec.check held to a grammar of
printable ASCII, and the Regenerate line's words quoted with every other character escaped
(hpc.quote, ascii_only): no value can end a comment line and start code or a document.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchpod import readers
from torchpod.contract import ENV_PRESET, SITE_DEPS
from torchpod.errors import InputError, RuntimeFailure

from . import hpc, jobs, kube, podsecurity, yamltext
from .jobs import RESTARTS
from .spec import JobSpec, check, default, flag, option_text, options, parse_counts, required


@dataclass(frozen=True)
class Output:
    name: str  # file name, no directory
    text: str


def invoke_line(spec: JobSpec) -> str:
    """The `invoke manifests` command that renders ``spec`` again: every option (spec.options,
    in their declared order) whose value is not its default, those marked ``always``, and
    only for the jobs an option applies to."""
    argv = ["invoke", "manifests"]
    for name, how in options():
        value = getattr(spec, name)
        if (how.only is not None and not how.only(spec)) or (not how.always and value == default(name)):
            continue
        if how.kinds is not None and spec.scheduler not in how.kinds:
            continue  # at its default here (spec.check refuses any other value)
        if isinstance(value, bool):
            argv += [flag(name)] if value else []
        elif how.repeat:
            argv += [word for item in value for word in (flag(name), item)]
        else:
            argv += [flag(name), option_text(spec, name)]
    return " ".join(hpc.quote(a, ascii_only=True) for a in [*argv, "--", *spec.command])


# Why a job's pods fail a Pod Security check, by check: what the job asked for that needs it.
WHY = {
    "hostNamespaces": "RDMA over the host's NICs (--rdma hostnetwork)",
    "hostPorts": "on the host's network each containerPort is a hostPort (--rdma hostnetwork)",
    "hostPathVolumes": "",  # named by volume (HOST_PATH_WHY)
    "capabilities_baseline": "NCCL pins memory for RDMA (IPC_LOCK)",
    "privileged": "--privileged",
    "runAsNonRoot": "IPC_LOCK takes effect for root alone",
    "capabilities_restricted": "IPC_LOCK takes effect for root alone",
    "runAsUser": "--run-as-user 0",
}

# Who asked for a hostPath volume, by the name kube.volumes gives it
HOST_PATH_WHY = (("devinf", "the host's /dev/infiniband (--rdma hostnetwork)"),
                 ("site-", "the node's net plugin and libfabric (the fabric's host paths)"),
                 ("volume-", "--volume hostpath:"))

# what a failure of the operator's own container (podsecurity.PYTORCH_INIT) is put down to
INJECTED = "the init container training-operator adds to Worker pods, without a securityContext"


def _why(failure: podsecurity.Failure) -> str:
    """Why the job fails a check: the operator's container, else what torchpod's option needs."""
    if podsecurity.PYTORCH_INIT_NAME in failure.detail:
        return INJECTED
    if failure.check == "hostPathVolumes":
        names = re.findall(r"'([^']+)'", failure.detail)
        return ", ".join(dict.fromkeys(why for name in names for prefix, why in HOST_PATH_WHY
                                       if name.startswith(prefix)))
    return WHY.get(failure.check, "")


def pod_security(spec: JobSpec, docs=None) -> tuple[str, str]:
    """(the Pod Security Standards level the namespace must allow, the header's text for it),
    judged on the rendered pods by torchpod_toolkit.manifests.podsecurity, never from a table."""
    level, failures = podsecurity.level(kube.objects(spec) if docs is None else docs)
    checks = list(dict.fromkeys((f.check, f.level) for _, f in failures))
    why = {f.check: _why(f) for _, f in reversed(failures)}  # the first failure of a check speaks for it
    reasons = "; ".join(f"{c}: {why[c]}" if why[c] else c for c, _ in checks)
    if level == "restricted":
        return level, "'restricted' (every check of the Pod Security Standards passes on the rendered pods)"
    missed = "baseline" if level == "privileged" else "restricted"
    text = f"'{level}' (fails {missed}: {reasons})"
    if level == "privileged":
        text += ": label the namespace pod-security.kubernetes.io/enforce=privileged"
    return level, text


def _require_level(spec: JobSpec, docs) -> None:
    """--pod-security LEVEL: the rendered pods meet it, else one line naming every check of
    that level they fail, and why the job needs what fails it."""
    if not spec.pod_security:
        return
    failed = [f for doc in docs for _, pod in podsecurity.pod_specs(doc)
              for f in podsecurity.failures_at(pod, spec.pod_security)]
    if not failed:
        return
    named = "; ".join(dict.fromkeys(f"{f.check} ({f.detail}: {_why(f)})" if _why(f) else f"{f.check} ({f.detail})"
                                    for f in failed))
    raise InputError(f"--pod-security={spec.pod_security} cannot be met: the pods fail {named}")


def shared_paths(spec: JobSpec) -> list[str]:
    """The header lines naming the paths a batch script needs on every node: the submit
    directory (the image file, the bound workdir, pbsdsh's statuses) and the node file the
    launcher reads inside the container (the kind's record). Nothing for a kind whose nodes
    share no submit directory (a SkyPilot task)."""
    kind = jobs.kind(spec.scheduler)
    if not kind.shared_dir:
        return []
    seen = ["the submit directory"]
    if spec.runtime in ("apptainer", "enroot"):
        seen.append(f"the {'SIF' if spec.runtime == 'apptainer' else 'squashfs'} written there "
                    f"(or TORCHPOD_{'SIF' if spec.runtime == 'apptainer' else 'SQSH'})")
    if kind.shared_writes:
        seen.append(f"{kind.shared_writes} there")
    node_file = kind.node_file
    if node_file and spec.runtime != "none":
        seen.append(f"${node_file}, bound into the container")
    lines = ["Shared: every node must see, at the same path, " + "; ".join(seen)]
    if spec.runtime == "podman":
        lines.append("podman-hpc: `pull` migrates the image to its squash directory, which must be on a "
                     "filesystem every node sees (a site setting; node-local unless the site sets it)")
    return lines


def ranks_line(spec: JobSpec, kind: jobs.JobKind) -> str:
    """How torch will number this job's nodes: torchpod orders its c10d or etcd-v2
    rendezvous by the node index (the launcher's torchpod.order), after the topology the
    kind's nodes are told, if any; an elastic job's rounds rank the nodes that came."""
    first = f"{kind.rank_domains}, then " if kind.rank_domains else ""
    if spec.min_nodes is not None:
        return (f"Ranks: each round ranks the nodes that joined by {first}node index (torchpod orders the "
                "rendezvous); a node's rank is known once its round forms")
    if kind.rank_domains:
        return f"Ranks: by {first}node index (torchpod orders the rendezvous): one domain's nodes are contiguous"
    return "Ranks: torch's group rank is the node index (torchpod orders the rendezvous by it)"


def restarts_line(spec: JobSpec, kind: jobs.JobKind) -> str:
    """What follows a failure: how many restarts the kind makes and how the job ends, as the
    kind declares it (JobKind.restarts), the elastic form under --nodes MIN:MAX."""
    text = kind.restarts_elastic if spec.min_nodes is not None and kind.restarts_elastic else kind.restarts
    return f"Restarts: {text.format(n=RESTARTS)}"


def submit_line(kind: jobs.JobKind, filename: str, piped: bool) -> str:
    """How to submit: the file by name, or, for a file printed to a pipe (``piped``), the
    submitter's standard-input form (JobKind.piped), or that the file must be written first."""
    if not piped:
        return f"Submit: {kind.submit} {filename}"
    if kind.piped:
        return f"Submit: {kind.piped} with this file on standard input"
    return (f"Submit: {kind.submit} {filename} once this is saved as {filename} ({kind.submit.split()[0]} reads no "
            "standard input; --out DIR writes it)")


def header(spec: JobSpec, filename: str, piped: bool = False) -> list[str]:
    gpus = f"{spec.gpus_per_node} GPUs" if spec.gpus_per_node else "CPU only"
    kind = jobs.kind(spec.scheduler)
    lines = [f"torchpod {spec.scheduler} job '{spec.name}': {spec.nnodes} nodes x {gpus}, image {spec.image}"]
    if kind.kube:
        lines.append(f"{submit_line(kind, filename, piped)}   (needs {kind.requires})")
        lines.append(f"Pod Security: namespace level {pod_security(spec)[1]}")
    else:
        lines.append(f"{submit_line(kind, filename, piped)}   (container runtime: {spec.runtime}"
                     + (f"; {kind.fan_out})" if kind.fan_out else ")"))
        lines += shared_paths(spec)
    if spec.rdzv == "etcd":
        where = "the etcd Pod and Service in this file" if spec.etcd_server else "an etcd you run"
        lines.append(f"Rendezvous: etcd-v2 at {spec.etcd_endpoint} ({where}; it must serve the v2 API)")
        if spec.etcd_server and "@" not in spec.etcd_image:
            lines.append(f"WARNING the etcd Pod's image {spec.etcd_image} is a tag, which its registry can move: "
                         "pin it with --etcd-image REPO@sha256:DIGEST (`docker buildx imagetools inspect "
                         f"{spec.etcd_image}` prints the digest)")
    else:
        lines.append(f"Rendezvous: c10d on node 0, port {spec.port}; torchpod derives it from the scheduler")
    lines.append(ranks_line(spec, kind))
    lines.append(restarts_line(spec, kind))
    if spec.rdma == "hostnetwork":
        lines.append("RDMA: hostNetwork + /dev/infiniband from the host (OKE style); "
                     "NICs and GIDs as the host has them")
    elif spec.rdma == "device-plugin":
        lines.append(f"RDMA: one {spec.rdma_resource} per pod from the RDMA device plugin; the NICs' netdevs must "
                     "reach the pod (e.g. a Multus secondary network)")
    if spec.privileged:
        lines.append("WARNING --privileged: every host device and capability is open to the container "
                     "(and AppArmor/seccomp are off); use it only to rule out a permissions problem")
    if spec.preset:
        lines.append(f"Fabric: {ENV_PRESET.name}={spec.preset}; the launcher applies that shape's NCCL settings")
    binds = spec.fabric_binds()
    if binds and (spec.kube or spec.runtime != "none"):
        lines.append("Net plugin: bound in from the host, where the launcher looks for it: "
                     + ", ".join(f"{h} -> {c}" for h, c in binds)
                     + (f"; add the plugin's other dependencies under {SITE_DEPS}"
                        if spec.fabric == "slingshot" else ""))
    if spec.mnnvl:
        lines.append(f"MNNVL: ComputeDomain {spec.compute_domain} gives every pod an IMEX channel from "
                     f"{spec.compute_domain_channel} (needs NVIDIA's DRA driver for GPUs >= 25.3, Kubernetes >= 1.32 "
                     f"with DRA, {kind.mnnvl}); GB200 nodes are aarch64: the image must have "
                     "a linux/arm64 build")
    lines += script_source(spec)
    lines.append(f"Regenerate: {invoke_line(spec)}")
    for line in lines:  # spec.check's grammars make this hold; a bug must not write a file
        if not all(" " <= ch <= "~" for ch in line):
            raise InputError(f"a header line would hold a character outside printable ASCII: {line!r}")
    return ["# " + line for line in lines]


# The image's working directory (docker/Dockerfile WORKDIR): where a pod starts without --workdir.
IMAGE_WORKDIR = "/workspace"


def script_source(spec: JobSpec) -> list[str]:
    """A note for a Kubernetes job whose script is a relative path with no --volume at (or
    above) the working directory: nothing in the manifest puts it there, so it must be in
    the image. (An HPC job binds its submit directory there; an absolute path says itself.)"""
    if not spec.kube or spec.workload != "train" or spec.command[0].startswith("/"):
        return []
    workdir = spec.workdir.rstrip("/") or "/" if spec.workdir else IMAGE_WORKDIR
    if any(workdir == v.path or workdir.startswith(v.path.rstrip("/") + "/") for v in spec.volumes):
        return []
    script = hpc.quote(spec.command[0], ascii_only=True)
    return [f"Script: {script} is read from {workdir} in the container, where nothing here mounts it: it must be "
            f"in the image there, or mounted with --volume (e.g. pvc:CLAIM:{workdir} or configmap:NAME:{workdir})"]


# Header lines a user must see even when the file goes down a pipe: `invoke manifests`
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
    _require_level(spec, docs)
    out = [Output(name, "\n".join(header(spec, name, piped)) + "\n" + yamltext.dump(docs))]
    if kind.cli:  # a CLI line beside the manifest (a kube.CliLine)
        sh = f"{base}.sh"
        cli: kube.CliLine = kind.cli.target
        # bash: the words may use $'...' quoting (hpc.quote), which POSIX sh before 2024 lacks
        lines = ["#!/bin/bash", hpc.SHELLCHECK, header(spec, sh)[0], header(spec, sh)[-1],
                 *(f"# {note.format(manifest=name)}" for note in cli.notes),
                 "exec " + " \\\n  ".join(_chunks(cli.build(spec)))]
        out.insert(0, Output(sh, "\n".join(lines) + "\n"))
    return out


def _chunks(argv: list[str]) -> list[str]:
    """Flag/value pairs on one line each, for a readable command."""
    i = next((k for k, a in enumerate(argv) if a.startswith("-")), len(argv))
    out = [hpc.line(argv[:i])]
    while i < len(argv):
        a = argv[i]
        if a.startswith("-") and a != "--" and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            out.append(hpc.line(argv[i:i + 2]))
            i += 2
        elif a == "--":
            out.append(hpc.line(argv[i:]))
            break
        else:
            out.append(hpc.quote(a))
            i += 1
    return out


REGENERATE = "# Regenerate: "
_BARE = re.compile(r"[A-Za-z0-9@%+=:,./_-]", re.ASCII)  # what shlex.quote leaves unquoted
_HEX_DIGITS = {"x": 2, "u": 4, "U": 8}
_SIMPLE = {"\\": "\\", "'": "'", "n": "\n", "r": "\r", "t": "\t"}


def regenerate_line(text: str) -> str:
    """The `invoke manifests ...` line in a rendered file's header: the first, split at
    newlines only (a script keeps U+2028 or U+0085 raw inside a quoted argument, which
    str.splitlines would take for a line end)."""
    for line in text.split("\n"):
        if line.startswith(REGENERATE):
            return line[len(REGENERATE):]
    raise InputError("no '# Regenerate: invoke manifests ...' line; expected a file `invoke manifests` wrote")


def _ansi_c(line: str, i: int) -> tuple[str, int]:
    """The text of the $'...' word starting at ``line[i]`` (after ``$'``) and the index past
    it: exactly the escapes hpc.quote writes, anything else refused."""
    out: list[str] = []
    while i < len(line):
        ch = line[i]
        if ch == "'":
            return "".join(out), i + 1
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        esc = line[i + 1:i + 2]
        if esc in _SIMPLE:
            out.append(_SIMPLE[esc])
            i += 2
        elif esc in _HEX_DIGITS:
            digits = line[i + 2:i + 2 + _HEX_DIGITS[esc]]
            if len(digits) != _HEX_DIGITS[esc] or not re.fullmatch(r"[0-9a-fA-F]+", digits) \
                    or int(digits, 16) > 0x10FFFF:
                raise InputError(f"bad escape \\{esc}{digits} at column {i}; expected \\{esc} and "
                                 f"{_HEX_DIGITS[esc]} hex digits")
            out.append(chr(int(digits, 16)))
            i += 2 + len(digits)
        else:
            raise InputError(f"escape \\{esc} at column {i} is not one torchpod writes; expected "
                             "\\\\, \\', \\n, \\r, \\t, \\xHH, \\uHHHH or \\UHHHHHHHH")
    raise InputError("a $'...' word is not closed; expected a closing quote")


def split_words(line: str) -> list[str]:
    """The words of a Regenerate line, as bash would read them, for the quoting hpc.quote
    and shlex.quote write: bare words, '...', $'...' and "..." without $, ` or \\ (never
    expanded); anything else is refused, so no line is read differently than bash would."""
    words: list[str] = []
    i, n = 0, len(line)
    while i < n:
        if line[i] == " ":
            i += 1
            continue
        parts: list[str] = []
        while i < n and line[i] != " ":
            ch = line[i]
            if ch == "'":
                end = line.find("'", i + 1)
                if end < 0:
                    raise InputError(f"a '...' word at column {i} is not closed; expected a closing quote")
                parts.append(line[i + 1:end])
                i = end + 1
            elif ch == "$" and line[i + 1:i + 2] == "'":
                text, i = _ansi_c(line, i + 2)
                parts.append(text)
            elif ch == '"':
                end = line.find('"', i + 1)
                if end < 0 or any(c in line[i + 1:end] for c in "$`\\"):
                    raise InputError(f'a "..." word at column {i} is not closed or holds $, ` or \\; expected '
                                     "the quoting `invoke manifests` writes")
                parts.append(line[i + 1:end])
                i = end + 1
            elif _BARE.fullmatch(ch):
                parts.append(ch)
                i += 1
            else:
                raise InputError(f"character {ch!r} at column {i} is not quoted; expected the quoting "
                                 "`invoke manifests` writes")
        words.append("".join(parts))
    return words


def _parser():
    """argparse for the Regenerate line's flags (spec.options: the flags of tasks.py's
    manifests), failing with one InputError instead of printing usage and exiting."""
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message: str):
            raise InputError(f"{message}; expected the flags of `invoke manifests`")

    p = Parser(prog="invoke manifests", add_help=False, allow_abbrev=False)
    for name, how in options():
        if isinstance(default(name), bool):
            p.add_argument(flag(name), dest=name, action="store_true")
        elif how.repeat:
            p.add_argument(flag(name), dest=name, action="append")
        else:
            p.add_argument(flag(name), dest=name)
    return p


def parse_invoke_line(line: str) -> JobSpec:
    """The JobSpec an `invoke manifests` line asks for (the flags of tasks.py's manifests);
    a malformed line is one InputError."""
    if not isinstance(line, str) or "\n" in line or "\r" in line:
        raise InputError(f"{line!r} is not one line; expected `invoke manifests ...`")
    argv = split_words(line)
    if argv[:2] != ["invoke", "manifests"]:
        raise InputError(f"{line[:80]!r} is not an `invoke manifests` line")
    argv = argv[2:]
    command: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, command = argv[:at], argv[at + 1:]
    given = parse_counts({k: v for k, v in vars(_parser().parse_args(argv)).items() if v not in (None, False)})
    for name in required():
        if name not in given:
            raise InputError(f"the line has no {flag(name)}; expected a full `invoke manifests` line")
    repeated = {name for name, how in options() if how.repeat}
    fields: dict[str, Any] = {k: tuple(v) if k in repeated else v for k, v in given.items()}
    return JobSpec(command=tuple(command), **fields)


def _existing(path: Path, limit: int) -> bytes | None:
    """The bytes of a regular file at ``path`` (None if nothing is there), read to at most
    ``limit`` + 1 bytes through the bounded reader: a longer file differs from what would be
    written whatever it holds, so a huge file costs no memory. Anything else (a directory, a
    link, a FIFO, a device) is refused: it is never read, never replaced."""
    expected = "a file torchpod wrote, or nothing there"
    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):  # the reader follows links; a link here is not replaced
            raise InputError(f"{path} is a symbolic link; expected a regular file: {expected}")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputError(f"{path} cannot be read ({exc.strerror or exc}); expected {expected}") from None
    return readers.read_head(path, what=str(path), expected=expected, limit=limit + 1)


def _check_destination(dest: Path) -> None:
    """``dest`` is a directory, or can be made one under a writable existing directory."""
    try:
        _walk_destination(dest)
    except OSError as exc:  # a name too long, a loop of links, a permission on the way
        raise InputError(f"--out={str(dest)[:200]!r} cannot be used ({exc.strerror or exc}); expected a "
                         "directory path you can write") from None


NAME_MAX = 255  # bytes in one path component (Linux's NAME_MAX, <linux/limits.h>)


def _walk_destination(dest: Path) -> None:
    long = next((part for part in dest.parts if len(os.fsencode(part)) > NAME_MAX), None)
    if long is not None:
        raise InputError(f"--out has a component of {len(os.fsencode(long))} bytes ({long[:40]!r}...); expected "
                         f"names of at most {NAME_MAX} bytes")
    probe = dest
    while not os.path.lexists(probe):
        probe = probe.parent
    if not probe.is_dir():
        what = "is an existing file" if probe == dest else f"is under {probe}, which is not a directory"
        raise InputError(f"--out={str(dest)!r} {what}; expected a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise InputError(f"--out={str(dest)!r}: {probe} is not writable; expected a directory you can write")


def write(dest, outputs: list[Output], *, force: bool = False) -> list[tuple[Path, bool]]:
    """Put ``outputs`` in directory ``dest``: all of them or none.

    ``dest`` is normalised first (``x/a/../c`` is ``x/c``: no directory is made that the
    path does not end in). A file already there with other content is kept and named,
    unless ``force``; the same content is left alone. Files are written into a temporary
    directory beside them and renamed into place (rename(2) within one filesystem is
    atomic), only once every one of them was written. Returns (path, changed) per file."""
    dest = Path(os.path.abspath(dest))
    _check_destination(dest)
    plan, kept = [], []
    for o in outputs:
        data = o.text.encode("utf-8")
        old = _existing(dest / o.name, len(data))
        if old is not None and old != data and not force:
            kept.append(o.name)
        plan.append((o.name, data, old != data))
    if kept:
        raise InputError(f"kept {', '.join(str(dest / k) for k in kept)}: it exists with other content (edited by "
                         "hand?); expected --force to overwrite it, or another --out")
    try:
        dest.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=dest, prefix=".torchpod-manifests-") as tmp:
            for name, data, changed in plan:
                if changed:
                    with open(Path(tmp) / name, "xb") as fh:  # the umask's mode, as write_text would
                        fh.write(data)
            done = []
            try:
                for name, _, changed in plan:
                    if changed:
                        os.replace(Path(tmp) / name, dest / name)
                        done.append(name)
            except OSError:
                for name in done:  # a later rename failed: take back the earlier ones
                    (dest / name).unlink(missing_ok=True)
                raise
    except OSError as exc:
        raise RuntimeFailure(f"could not write into --out={str(dest)!r}: {exc.strerror or exc}; nothing "
                             "was written") from None
    return [(dest / name, changed) for name, _, changed in plan]
