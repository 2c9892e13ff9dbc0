"""Stand-ins for the programs a generated job script runs, so the tests can execute the
script with bash and see exactly what reaches ``torchpod``. Shared by the manifest
tests (a plain module on pytest's pythonpath); nothing here is upstream code.

Each stub is a small bash script (bash starts in about a millisecond; a Python stub costs
sixty) that appends its argv to one log as NUL-separated fields (name, argc, args), then
does what the real tool does with its command line: a fan-out (srun, mpiexec, pbsdsh, blaunch)
strips its own options and executes the command once (one node is enough to see the
argv), a container runtime strips its options and the image argument and executes what
the container would (``exec`` a command, or the image's ENTRYPOINT ``torchpod`` with the
rest as its arguments), and ``torchpod`` only records. A stub that meets an option it does
not model, or a malformed value, records ``STUB-ERROR`` and exits 97: a change in the
generator then fails the tests loudly instead of being guessed at.

The stubs use bash builtins only, so a test's PATH can hold nothing but this directory (and
the real ``sort``, ``wc`` and ``env`` the scripts use): any other command a script tries to
run reaches bash's ``command_not_found_handle``, which the environment of ``job_env``
defines to record ``NOT-FOUND``.
"""

from __future__ import annotations

import os
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

ERROR = "STUB-ERROR"
NOT_FOUND = "NOT-FOUND"
ENV_RECORD = "torchpod-env"  # what torchpod saw: TORCHPOD_PRESET, SLURM_JOB_ID, PBS_NODEFILE,
# LSB_DJOB_HOSTFILE (or <unset>)
REAL_TOOLS = ("sort", "wc", "env", "id")  # coreutils the scripts may run; the real ones

_PRELUDE = r"""#!/bin/bash
# Test stub for %(name)s (tests/manifest_stubs.py). %(doc)s
set -u -f
LOG=%(log)s
NAME=%(name)s
record() { local n=$1; shift; printf '%%s\0' "$n" "$#" "$@" >> "$LOG"; }
fail() { record STUB-ERROR "$NAME: $*"; printf 'stub %%s: %%s\n' "$NAME" "$*" >&2; exit 97; }
need() { [ "$1" -ge 2 ] || fail "$2 needs a value"; }  # need $# "$1": an option and its value
setenv() {  # KEY=VALUE as the runtime's --env/-e would set it inside the container
  case "$1" in
    [A-Za-z_]*=*) export "${1%%%%=*}=${1#*=}" ;;
    [A-Za-z_]*) ;;  # a bare NAME (or a NAME_* pattern): passed from the caller's environment
    *) fail "environment entry $1: expected KEY=VALUE or KEY" ;;
  esac
}
record "$NAME" "$@"
"""

STUBS: dict[str, tuple[str, str]] = {}  # name -> (the CLI reference it follows, body)

STUBS["srun"] = ("srun(1) (Slurm 24.05): `srun [OPTIONS...] executable [args...]`, options end at the first "
                 "non-option (getopt '+') or at `--`; --export=ALL|NONE|NAME[=VALUE],...; pyxis (NVIDIA/pyxis "
                 "wiki Usage) adds --container-image/--container-mounts=SRC:DST[:FLAGS][,...]/"
                 "--container-workdir and runs the command itself in the container, not its ENTRYPOINT.", r"""
image=""
export_list() {
  local IFS=, item
  for item in $1; do
    case "$item" in
      ALL) ;;
      NONE|NIL) fail "--export=$1: NONE/NIL is not modelled" ;;
      *) setenv "$item" ;;
    esac
  done
}
while [ $# -gt 0 ]; do
  case "$1" in
    --container-image=*) image=${1#*=}; shift ;;
    --container-image) need $# "$1"; image=$2; shift 2 ;;
    --export=*) export_list "${1#*=}"; shift ;;
    --export) need $# "$1"; export_list "$2"; shift 2 ;;
    --ntasks-per-node=*|--nodes=*|--ntasks=*|--kill-on-bad-exit=*|--container-mounts=*|--container-workdir=*|\
    --gpus-per-node=*|--mpi=*) shift ;;
    --ntasks-per-node|--nodes|-N|--ntasks|-n|--container-mounts|--container-workdir|--gpus-per-node|--mpi)
      need $# "$1"; shift 2 ;;
    --kill-on-bad-exit|-K) shift ;;
    --) shift; break ;;
    -*) fail "unknown option $1" ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || fail "no executable"
if [ -n "$image" ] && [ ! -f "$image" ]; then fail "--container-image $image: no such squashfs file"; fi
exec "$@"
""")

STUBS["mpiexec"] = ("Cray PALS mpiexec(1) (HPE Cray PALS): `mpiexec [options] executable [args]`; -n/--np RANKS, "
                    "--ppn/-ppn RANKS_PER_NODE; the job's environment is copied to the ranks.", r"""
ranks=""
while [ $# -gt 0 ]; do
  case "$1" in
    -n|--np|-np) need $# "$1"; ranks=$2; shift 2 ;;
    --np=*) ranks=${1#*=}; shift ;;
    --ppn|-ppn) need $# "$1"; shift 2 ;;
    --ppn=*) shift ;;
    --) fail "'--' is not modelled for PALS mpiexec: check mpiexec(1) first" ;;
    -*) fail "unknown option $1" ;;
    *) break ;;
  esac
done
case "$ranks" in ''|*[!0-9]*|0) fail "-n '$ranks': expected a positive number of ranks" ;; esac
[ $# -gt 0 ] || fail "no executable"
exec "$@"
""")

STUBS["pbsdsh"] = ("pbsdsh (openpbs src/cmds/pbsdsh.c): getopt(\"c:n:svo\") then `-- program [args...]`, spawned "
                   "with tm_spawn (an argv, no shell) in $HOME with the MOM's environment; it refuses to run "
                   "outside a job (no PBS_ENVIRONMENT).", r"""
[ -n "${PBS_ENVIRONMENT-}" ] || fail "not executing under PBS"
while [ $# -gt 0 ]; do
  case "$1" in
    --) shift; break ;;
    -c|-n) need $# "$1"; shift 2 ;;
    -c?*|-n?*|-s|-v|-o) shift ;;
    -*) fail "unknown option $1" ;;
    *) fail "program $1 before '--': glibc getopt would permute and read its options as pbsdsh's" ;;
  esac
done
[ $# -gt 0 ] || fail "no program"
cd "$HOME" || fail "no HOME"
exec "$@"
""")

STUBS["blaunch"] = ("IBM LSF 10.1 blaunch(8): `blaunch [-n] [-u host_file | -z host_name ... | host_name] "
                    "[-use-login-shell | -no-shell] command [argument ...]`, only inside an LSF job; -u runs the "
                    "command on every host the file lists, as a remote task that starts in no directory the job "
                    "names (here $HOME).", r"""
[ -n "${LSB_JOBID-}" ] || fail "blaunch works only under LSF (no LSB_JOBID)"
hostfile=""
while [ $# -gt 0 ]; do
  case "$1" in
    -n|-no-shell|-use-login-shell) shift ;;
    -u) need $# "$1"; hostfile=$2; shift 2 ;;
    -z) fail "-z is not modelled" ;;
    -*) fail "unknown option $1" ;;
    *) break ;;
  esac
done
[ -n "$hostfile" ] || fail "no -u host_file: a bare first word would be read as a host name"
[ -f "$hostfile" ] || fail "-u $hostfile: no such host file"
[ $# -gt 0 ] || fail "no command"
cd "$HOME" || fail "no HOME"
exec "$@"
""")

STUBS["apptainer"] = ("apptainer(1) 1.3: `apptainer pull [--force] [OUTPUT] URI` and `apptainer exec [exec "
                      "options] CONTAINER COMMAND [ARGS...]` (--bind src[:dest[:opts]][,...], --pwd, --env "
                      "KEY=VAL, --nv); exec runs COMMAND in the container, not the runscript.", r"""
[ $# -gt 0 ] || fail "no subcommand"
sub=$1; shift
case "$sub" in
  pull)
    while [ $# -gt 0 ]; do
      case "$1" in
        --force|-F|--disable-cache) shift ;;
        --) shift; break ;;
        -*) fail "unknown pull option $1" ;;
        *) break ;;
      esac
    done
    case $# in 1) out=""; uri=$1 ;; 2) out=$1; uri=$2 ;; *) fail "pull: expected [OUTPUT] URI, got $# words" ;; esac
    case "$uri" in docker://?*) ;; *) fail "pull: URI $uri: expected docker://REFERENCE" ;; esac
    if [ -n "$out" ]; then
      [ ! -e "$out" ] || fail "pull: $out exists (apptainer refuses without --force)"
      : > "$out"
    fi
    exit 0 ;;
  exec)
    while [ $# -gt 0 ]; do
      case "$1" in
        --nv|--cleanenv|-e|--containall|-C|--writable-tmpfs|--no-home) shift ;;
        --bind|-B|--pwd|--home|--mount) need $# "$1"; shift 2 ;;
        --bind=*|--pwd=*|--home=*|--mount=*) shift ;;
        --env) need $# "$1"; setenv "$2"; shift 2 ;;
        --env=*) setenv "${1#*=}"; shift ;;
        --) shift; break ;;
        -*) fail "unknown exec option $1" ;;
        *) break ;;
      esac
    done
    [ $# -ge 2 ] || fail "exec: expected CONTAINER COMMAND [ARGS...]"
    [ -f "$1" ] || fail "exec: container $1: no such SIF file"
    shift
    exec "$@" ;;
  *) fail "subcommand $sub is not modelled" ;;
esac
""")

STUBS["enroot"] = ("enroot(1) 3.5 (NVIDIA/enroot doc/cmd/import.md, start.md): `enroot import [-o OUTPUT] "
                   "docker://[USER@][REGISTRY#]IMAGE[:TAG]` (the URI pattern of src/docker.sh docker::import), "
                   "`enroot start [options] [--] IMAGE [COMMAND] [ARG...]` with -m/--mount as fstab fields "
                   "separated by ':'; start runs the image's /etc/rc, which for an imported Docker image is "
                   "`exec ENTRYPOINT \"$@\"` (src/docker.sh docker::configure): here ENTRYPOINT [\"torchpod\"].",
                   r"""
[ $# -gt 0 ] || fail "no subcommand"
sub=$1; shift
case "$sub" in
  import)
    out=""
    while [ $# -gt 0 ]; do
      case "$1" in
        -o|--output) need $# "$1"; out=$2; shift 2 ;;
        -a|--arch) need $# "$1"; shift 2 ;;
        --) shift; break ;;
        -*) fail "unknown import option $1" ;;
        *) break ;;
      esac
    done
    [ $# -eq 1 ] || fail "import: expected one URI, got $# words"
    re='^docker://(([^@#/]+)@)?(([^#]+)#)?([[:lower:][:digit:]/._-]+)(:([[:alnum:]._:-]+))?$'
    [[ $1 =~ $re ]] || fail "import: invalid image reference: $1"
    if [ -n "$out" ]; then
      [ ! -e "$out" ] || fail "import: file already exists: $out"
      : > "$out"
    fi
    exit 0 ;;
  start)
    while [ $# -gt 0 ]; do
      case "$1" in
        -c|--conf|--rc|-m|--mount) need $# "$1"; shift 2 ;;
        -e|--env) need $# "$1"; setenv "$2"; shift 2 ;;
        -r|--root|-w|--rw) shift ;;
        --) shift; break ;;
        -*) fail "unknown start option $1" ;;
        *) break ;;
      esac
    done
    [ $# -ge 1 ] || fail "start: expected IMAGE [COMMAND] [ARG...]"
    [ -f "$1" ] || fail "start: image $1: no such squashfs file"
    shift
    if [ $# -gt 0 ]; then exec torchpod "$@"; else exec torchpod --help; fi ;;
  *) fail "subcommand $sub is not modelled" ;;
esac
""")

_RUN_OPTIONS = r"""
        --rm|--privileged|--init) shift ;;
        -u|--user) need $# "$1"; case "$2" in [0-9]*:[0-9]*) ;; *) fail "--user $2: expected UID:GID" ;; esac
          case "$2" in *[!0-9:]*) fail "--user $2: expected numeric UID:GID" ;; esac; shift 2 ;;
        -e|--env) need $# "$1"; addenv "$2"; shift 2 ;;
        -e?*) addenv "${1#-e}"; shift ;;
        --env=*) addenv "${1#*=}"; shift ;;
        --network|--ipc|-v|--volume|-w|--workdir|--name|--shm-size|--ulimit|--gpus|--device|--cap-add)
          need $# "$1"; shift 2 ;;
        --network=*|--ipc=*|--volume=*|--workdir=*|--name=*|--shm-size=*|--ulimit=*|--gpus=*|--device=*|\
        --cap-add=*) shift ;;
"""

_RUNTIME = r"""
# The container starts with only the variables named by --env/-e: KEY=VALUE, or KEY taken
# from the caller when set%(glob_doc)s.
envs=()
addenv() {
  case "$1" in
    *'*'*) %(glob)s ;;
    [A-Za-z_]*=*) envs+=("$1") ;;
    [A-Za-z_]*) if [ -n "${!1+x}" ]; then envs+=("$1=${!1}"); fi ;;
    *) fail "environment entry $1: expected KEY=VALUE or KEY" ;;
  esac
}
[ $# -gt 0 ] || fail "no subcommand"
sub=$1; shift
case "$sub" in
  pull)
    while [ $# -gt 0 ]; do
      case "$1" in
        -q|--quiet) shift ;;
        --platform) need $# "$1"; shift 2 ;;
        -*) fail "unknown pull option $1" ;;
        *) break ;;
      esac
    done
    [ $# -eq 1 ] || fail "pull: expected one IMAGE, got $# words"
    exit 0 ;;
  run)
    while [ $# -gt 0 ]; do
      case "$1" in
%(extra)s%(options)s
        --) shift; break ;;
        -*) fail "unknown run option $1" ;;
        *) break ;;
      esac
    done
    [ $# -ge 1 ] || fail "run: expected IMAGE [ARG...]"
    shift
    exec env -i ${envs[@]+"${envs[@]}"} "${0%%/*}/torchpod" "$@" ;;
  *) fail "subcommand $sub is not modelled" ;;
esac
"""

STUBS["docker"] = ("docker run reference (Docker 27): `docker run [OPTIONS] IMAGE [COMMAND] [ARG...]`, the "
                   "ARGs go to the image's ENTRYPOINT (here torchpod); `docker pull [-q] IMAGE`.",
                   _RUNTIME % {"extra": "", "options": _RUN_OPTIONS, "glob_doc": "",
                               "glob": 'fail "--env $1: docker takes no NAME* pattern"'})
STUBS["podman-hpc"] = ("podman-hpc (NERSC/podman-hpc README): `podman-hpc pull IMAGE` migrates the image to the "
                       "nodes' squashfs store; `podman-hpc run [--gpu] [--mpi] [podman run options] IMAGE "
                       "[ARG...]` as podman-run(1): ARGs go to the ENTRYPOINT, --env accepts NAME_* patterns.",
                       _RUNTIME % {"extra": "        --gpu|--mpi|--openmpi-pmi2|--cuda-mpi) shift ;;\n",
                                   "options": _RUN_OPTIONS, "glob_doc": "; NAME_* passes every variable so named",
                                   "glob": 'local name; for name in $(compgen -e); do case "$name" in '
                                           '"${1%%\\*}"*) envs+=("$name=${!name}") ;; esac; done'})

STUBS["runai"] = ("Run:ai CLI reference (v2.18+): `runai training pytorch submit NAME [flags] -- ARGS`; the "
                  "ARGS go to the image's ENTRYPOINT.", r"""
[ "${1-} ${2-} ${3-}" = "training pytorch submit" ] || fail "only 'training pytorch submit' is modelled"
shift 3
[ $# -gt 0 ] || fail "no job name"
case "$1" in -*) fail "job name $1 looks like a flag" ;; esac
shift
while [ $# -gt 0 ]; do
  case "$1" in
    -p|--project|-i|--image|--workers|-g|--gpu-devices-request|--capability|--extended-resource|-e|--environment)
      need $# "$1"; shift 2 ;;
    --large-shm|--host-network) shift ;;
    --) shift; break ;;
    -*) fail "unknown flag $1" ;;
    *) fail "stray word $1 before '--'" ;;
  esac
done
exit 0
""")

STUBS["torchpod"] = ("The image's ENTRYPOINT: records its argv and the fabric preset it was handed.", r"""
record torchpod-env "${TORCHPOD_PRESET-<unset>}" "${SLURM_JOB_ID-<unset>}" "${PBS_NODEFILE-<unset>}" \
  "${LSB_DJOB_HOSTFILE-<unset>}"
exit 0
""")


def install(bindir: Path, log: Path) -> None:
    """Write every stub into ``bindir`` (recording to ``log``) and link the real tools."""
    bindir.mkdir(parents=True, exist_ok=True)
    for name, (doc, body) in STUBS.items():
        path = bindir / name
        path.write_text(_PRELUDE % {"name": name, "doc": doc.replace("\n", " "), "log": shlex.quote(str(log))}
                        + body)
        path.chmod(0o755)
    for tool in REAL_TOOLS:
        real = shutil.which(tool, path="/usr/bin:/bin")
        if real is None:
            raise RuntimeError(f"coreutils' {tool} is missing")
        (bindir / tool).symlink_to(real)


def job_env(bindir: Path, log: Path, **extra: str) -> dict[str, str]:
    """The environment a job script runs in: PATH is the stubs only, and a command bash
    cannot find is recorded as NOT-FOUND (bash imports the exported function)."""
    handler = f"() {{ printf '%s\\0' {NOT_FOUND} \"$#\" \"$@\" >> {shlex.quote(str(log))}; return 127; }}"
    return {"PATH": str(bindir), "BASH_FUNC_command_not_found_handle%%": handler, **extra}


@dataclass(frozen=True)
class Call:
    name: str
    args: tuple[str, ...]


def read_log(log: Path) -> list[Call]:
    """The calls recorded in ``log``, in order."""
    if not log.exists():
        return []
    fields = [f.decode("utf-8", "surrogateescape") for f in log.read_bytes().split(b"\0")]
    if fields and fields[-1] == "":
        fields.pop()
    calls, i = [], 0
    while i < len(fields):
        name, count = fields[i], int(fields[i + 1])
        calls.append(Call(name, tuple(fields[i + 2:i + 2 + count])))
        i += 2 + count
    return calls


def _split_options(args: tuple[str, ...], with_value: set[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """(option, value) pairs before the first operand, and the operands (after `--` too)."""
    opts, i = [], 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return opts, list(args[i + 1:])
        if not a.startswith("-"):
            break
        if "=" in a and a.startswith("--"):
            opts.append(tuple(a.split("=", 1)))
            i += 1
        elif a in with_value:
            opts.append((a, args[i + 1]))
            i += 2
        else:
            opts.append((a, ""))
            i += 1
    return opts, list(args[i:])


def mounts(call: Call) -> list[tuple[str, str]]:
    """(host, container) of every bind ``call`` asks for, parsed the way the tool parses it:
    apptainer --bind src[:dest[:opts]] split on ','; docker/podman -v src:dest[:opts]; enroot
    --mount fstab fields split on ':'; pyxis --container-mounts SRC:DST[:FLAGS] split on ','."""
    if call.name == "srun":
        opts, _ = _split_options(call.args, {"--container-mounts", "--container-image", "--export", "-N", "-n"})
        specs = [s for o, v in opts if o == "--container-mounts" for s in v.split(",")]
    elif call.name == "apptainer":
        opts, _ = _split_options(call.args[1:], {"--bind", "-B", "--pwd", "--env", "--home", "--mount"})
        specs = [s for o, v in opts if o in ("--bind", "-B") for s in v.split(",")]
    elif call.name == "enroot":
        opts, _ = _split_options(call.args[1:], {"-m", "--mount", "-e", "--env", "-c", "--conf", "--rc"})
        specs = [v for o, v in opts if o in ("-m", "--mount")]
    else:  # docker, podman-hpc
        opts, _ = _split_options(call.args[1:], {"-e", "--env", "--network", "--ipc", "-v", "--volume", "-w",
                                                 "--workdir", "--name", "--shm-size", "--ulimit", "--gpus",
                                                 "-u", "--user"})
        specs = [v for o, v in opts if o in ("-v", "--volume")]
    out = []
    for spec in specs:
        parts = spec.split(":")
        out.append((parts[0], parts[1] if len(parts) > 1 else parts[0]))
    return out


def operands(call: Call, with_value: set[str]) -> list[str]:
    """The words after ``call``'s options (its subcommand dropped for runtimes)."""
    return _split_options(call.args, with_value)[1]


def realpath(path: Path) -> str:
    return os.path.realpath(path)
