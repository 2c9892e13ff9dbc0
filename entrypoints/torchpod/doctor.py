"""`torchpod doctor`: why NCCL is (not) using RDMA on this node, one line per check.

    torchpod doctor [--sysfs-root DIR] [--nccl-log FILE] [--format text|json]

Preflight checks (``preflight``, pure: it takes the env and a ``Machine`` snapshot that
``gather`` reads from the process and the filesystem): RDMA devices and their uverbs
nodes, the locked-memory limit, /dev/shm, the verbs providers, the GID choice, user
variables that contradict the hardware, the NCCL net plugin a fabric needs (or one on
InfiniBand/RoCE nobody asked for), GPUs, NCCL's configuration files (fabric.ncclconf: every
check judges the environment NCCL will see), NCCL_*/FI_* names nobody reads (fabric.names),
the driver against the image's CUDA (fabric.driver), IMEX channels (fabric.imex), and a
reverse lookup of this node's address that keeps every c10d connection waiting
(torchpod.reverse_dns: a row only when it is slow). With
``--nccl-log`` it also says which transport NCCL really used (torchpod.nccl_log), quoting
the lines that prove it.

Each row is a ``Check``: a name and a typed Finding (torchpod.fabric.findings). The
fabric's own findings become rows by their code's topic (ROW_OF_TOPIC), and which checks
apply follows the fabric's record (verbs provider, libfabric provider): no row, status or
exit code depends on a message's words.

Exit 0 when nothing failed; 1 when a check's finding is FAIL or the log shows sockets on a
node with RDMA hardware; 2 for bad input. `torchpod run` with TORCHPOD_DOCTOR=1 runs the preflight
first and refuses to start on a failure.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import json
import os
import re
import resource
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from . import nccl_log, netplugin, readers, reverse_dns
from .contract import ENV_DOCTOR, ENV_SITE_LIB, SYSFS_ROOT_DEFAULT
from .errors import InputError
from .fabric import FABRICS, FabricReport, by_name, detect_fabric, driver, imex, names, ncclconf, site
from .fabric.findings import Finding, Severity
from .words import plural

OK, WARN, FAIL = Severity.OK, Severity.WARN, Severity.FAIL
GiB = 1 << 30
# NCCL pins its IB buffers; container runtimes default to 64 KiB or 8 MiB of locked memory.
MEMLOCK_NEEDED = GiB
SHM_WANTED = GiB  # NCCL's intra-node buffers live in /dev/shm; Docker's default is 64 MiB
# The fabric findings that become rows of their own, by the code's topic (findings.py).
ROW_OF_TOPIC = {"user": "user-setting", "gid": "gid"}


@dataclass(frozen=True)
class Check:
    """One row of the report: a check's name and its finding."""

    name: str
    finding: Finding

    @property
    def status(self) -> str:
        return self.finding.severity.value

    @property
    def detail(self) -> str:
        return self.finding.message

    @property
    def fix(self) -> str:
        return self.finding.fix

    def as_dict(self) -> dict[str, str]:
        return {"name": self.name, "status": self.status, "detail": self.detail, "fix": self.fix,
                "code": self.finding.code}


def _row(name: str, what: str, severity: Severity, detail: str, fix: str = "") -> Check:
    return Check(name, Finding(f"doctor.{name}.{what}", severity, detail, fix))


@dataclass(frozen=True)
class Machine:
    """What gather() read; tests build one by hand."""

    sysfs_root: Path = Path(SYSFS_ROOT_DEFAULT)
    proc_root: Path = Path("/proc")
    uverbs: tuple[str, ...] = ()  # /dev/infiniband/uverbs*
    memlock: int | None = None  # bytes; None: unlimited
    shm_bytes: int | None = None  # None: no /dev/shm
    verbs_error: str | None = None  # why libibverbs.so.1 did not load; None: it loaded
    providers: tuple[str, ...] = ()  # verbs providers whose library dlopens (/etc/libibverbs.d/<name>.driver)
    net_plugins: tuple[str, ...] = ()  # libnccl-net*.so NCCL would find
    gpu_count: int | None = None  # gpus.visible: the count the plan's nproc uses too
    net_probe: dict | None = None  # netplugin.run_probe: NCCL's plugin, loaded as NCCL would
    fi_providers: tuple[str, ...] | None = None  # `fi_info -l`; None: no fi_info
    fi_devices: tuple[str, ...] = ()  # providers `fi_info -p NAME` finds a device for (efa, cxi)
    root: Path = Path("/")
    cuda: tuple[int, int] | None = None  # the CUDA the image's torch was built with (driver.torch_cuda)
    cuda_why: str = "not read"  # why ``cuda`` is None
    reverse_dns: reverse_dns.Lookup | None = None  # the reverse lookup c10d makes of this node's address


def gather(env: Mapping[str, str], sysfs_root: Path, gpu_count: int | None) -> Machine:
    """Read what the doctor checks beyond torchpod.facts (the only impure part of the
    doctor): ``gpu_count`` comes from there (gpus.visible), never counted again here."""
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    try:
        stat = os.statvfs("/dev/shm")
        shm = stat.f_blocks * stat.f_frsize
    except OSError:
        shm = None
    verbs_error, providers = _verbs_providers()
    libs = site.find(env, Path("/"))
    # the workers' search path: the site's directories first, as the plan sets it
    search = ":".join([*libs.dirs, *([env["LD_LIBRARY_PATH"]] if env.get("LD_LIBRARY_PATH") else [])])
    probe_env = {**env, "LD_LIBRARY_PATH": search} if search else dict(env)
    # The probe is the check itself (the plugin loaded as NCCL loads it), not a reading: it
    # keeps netplugin's own bound, so a plugin on a slow shared file system is not failed.
    net_probe = netplugin.run_probe(probe_env, [n for n, _ in netplugin.candidates(env)])
    fi_providers, fi_devices = _libfabric(env, libs)
    dirs = [d for d in search.split(":") if d]
    plugins = [p for d in dirs for p in sorted(glob.glob(os.path.join(d, "libnccl-net*.so")))]
    found = ctypes.util.find_library("nccl-net")
    if found and found not in plugins:
        plugins.append(found)
    cuda, cuda_why = driver.torch_cuda()
    address = reverse_dns.own_address()
    return Machine(reverse_dns=reverse_dns.lookup(address) if address else None,
        cuda=cuda, cuda_why=cuda_why, sysfs_root=sysfs_root, uverbs=tuple(sorted(glob.glob("/dev/infiniband/uverbs*"))),
        memlock=None if soft == resource.RLIM_INFINITY else soft, shm_bytes=shm, verbs_error=verbs_error,
        providers=tuple(providers), net_plugins=tuple(plugins), gpu_count=gpu_count, net_probe=net_probe,
        fi_providers=fi_providers, fi_devices=fi_devices,
    )


def _verbs_providers() -> tuple[str | None, list[str]]:
    """(why libibverbs.so.1 does not load or None, the verbs providers whose library loads)."""
    providers: list[str] = []
    try:
        ctypes.CDLL("libibverbs.so.1", mode=ctypes.RTLD_GLOBAL)  # providers resolve against it
    except OSError as exc:
        return str(exc), providers
    for driver_file in sorted(glob.glob("/etc/libibverbs.d/*.driver")):
        name = Path(driver_file).stem
        for lib in glob.glob(f"/usr/lib/*/libibverbs/lib{name}-rdmav*.so"):
            try:
                ctypes.CDLL(lib)
                providers.append(name)
                break
            except OSError:
                continue
    return None, providers


# The libfabric providers of the fabrics reached through the net plugin (efa, cxi).
FI_PROVIDERS = tuple(f.fi_provider for f in FABRICS if f.fi_provider)


def _libfabric(env: Mapping[str, str], libs: site.SiteLibs) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
    """(providers libfabric was built with, `fi_info -l`; None: no fi_info) and the device
    providers for which `fi_info -p NAME` finds a device here (it answers -61, No data
    available, when the NIC is not in this container). The site's libfabric first (its bin/
    first on PATH); every `fi_info` side by side, under the one helper bound."""
    bins = [str(Path(d).parent / "bin") for d in libs.dirs]
    tool = shutil.which("fi_info", path=":".join([*bins, env.get("PATH", os.defpath)]))
    if tool is None:
        return None, ()
    search = ":".join([*libs.dirs, env.get("LD_LIBRARY_PATH", "")]).strip(":")
    asks = {"list": [tool, "-l"], **{name: [tool, "-p", name] for name in FI_PROVIDERS}}
    answers = readers.run_helpers(asks, env={**env, "LD_LIBRARY_PATH": search})
    listed, _ = answers["list"]
    if listed is None:  # it did not start or answer in time: as if there were no fi_info
        return None, ()
    providers = tuple(sorted({m.split(";")[0] for m in re.findall(r"^(\S+?):", listed, re.M)}))
    return providers, tuple(n for n in FI_PROVIDERS if n in providers and not answers[n][1])


def _size(n: int | None) -> str:
    if n is None:
        return "unlimited"
    return f"{n / GiB:.1f} GiB" if n >= GiB else f"{n // 1024} KiB" if n < 1 << 20 else f"{n >> 20} MiB"


def _rdma_checks(fabric: FabricReport, m: Machine) -> list[Check]:
    record = by_name(fabric.fabric)
    provider = record.verbs_provider if record else None
    if provider is None:
        return []
    out = []
    if m.uverbs:
        out.append(_row("uverbs", "ok", OK, f"{plural(len(m.uverbs), 'device node')} under /dev/infiniband"))
    else:
        out.append(_row("uverbs", "missing", FAIL, "no /dev/infiniband/uverbs* in this container: NCCL cannot open "
                        "the RDMA devices sysfs shows", "mount /dev/infiniband (hostPath) or request the RDMA "
                        "device plugin's resource (e.g. rdma/rdma_shared_device_a)"))
    if m.memlock is not None and m.memlock < MEMLOCK_NEEDED:
        out.append(_row("memlock", "low", FAIL, f"locked-memory limit {_size(m.memlock)}: NCCL cannot register "
                        "its IB buffers", "docker run --ulimit memlock=-1, or raise the pod's RLIMIT_MEMLOCK "
                        "(capability IPC_LOCK alone does not raise the runtime's default)"))
    else:
        out.append(_row("memlock", "ok", OK, f"locked-memory limit {_size(m.memlock)}"))
    if m.verbs_error is not None:
        out.append(_row("verbs", "no-libibverbs", FAIL, f"libibverbs.so.1 does not load: {m.verbs_error}",
                        "use a torchpod image (rdma-core is in it) or install libibverbs1"))
    elif provider not in m.providers:
        out.append(_row("verbs", "no-provider", FAIL, f"no loadable {provider} verbs provider (loadable: "
                        f"{', '.join(m.providers) or 'none'})", "install ibverbs-providers"))
    else:
        out.append(_row("verbs", "ok", OK, f"libibverbs loads; {provider} provider present"))
    return out


def _plugin_checks(env: Mapping[str, str], fabric: FabricReport, m: Machine) -> list[Check]:
    """EFA and Slingshot: the plugin NCCL would load, loaded the way NCCL loads it."""
    record = by_name(fabric.fabric)
    if record is None or record.fi_provider is None:
        return []
    out = []
    libs = site.find(env, m.root)
    if "NCCL_NET_PLUGIN" in env and libs.plugin and libs.plugin.endswith("/libnccl-net.so"):
        out.append(_row("net-plugin-env", "blocks-default", FAIL, f"NCCL_NET_PLUGIN={env['NCCL_NET_PLUGIN']} is set "
                        f"while the site injects {libs.plugin}: NCCL then never tries libnccl-net.so",
                        "unset NCCL_NET_PLUGIN (NCCL tries libnccl-net.so only when it is unset)"))
    out += _probe_checks(env, fabric, m.net_probe or {})
    out += _fi_checks(env, record.fi_provider, m)
    return out


def _probe_checks(env: Mapping[str, str], fabric: FabricReport, probe: dict) -> list[Check]:
    why = "; ".join(f"{n}: {w}" for n, w in netplugin.candidates(env)) or "NCCL_NET_PLUGIN=none"
    if probe.get("skipped"):
        return [_row("net-plugin", "skipped", FAIL, probe["skipped"], "unset NCCL_NET_PLUGIN")]
    if not probe.get("loaded"):
        errors = "; ".join(t["error"] for t in probe.get("tried") or ()) or probe.get("crashed") or "not found"
        return [_row("net-plugin", "not-loaded", FAIL, f"{fabric.fabric} needs the aws-ofi-nccl NCCL net plugin; "
                     f"NCCL would load none ({why}): {errors}",
                     f"bind-mount the site's plugin and libfabric at {site.SITE_LIB} (or set {ENV_SITE_LIB.name}), "
                     "or use an image variant that carries one")]
    out = [_row("net-plugin", "ok", OK, f"{probe.get('path')} loads with RTLD_NOW ({why})")]
    want, chosen = probe.get("wanted") or [], probe.get("chosen")
    exported = ", ".join(f"v{v}" for v in probe.get("exported") or ()) or "none"
    if chosen:
        out.append(_row("net-plugin-api", "ok", OK, f"exports {exported}; NCCL {probe.get('nccl') or '?'} takes "
                        f"ncclNetPlugin_v{chosen}, name {probe.get('plugin_name')!r}"))
    else:
        out.append(_row("net-plugin-api", "no-match", FAIL, f"exports {exported}; NCCL {probe.get('nccl') or '?'} "
                        "tries " + ", ".join(f"v{v}" for v in want) + ": none matches, NCCL ignores the plugin",
                        "use an aws-ofi-nccl release built for this NCCL"))
    fabric_lib = probe.get("libfabric")
    if fabric_lib:
        out.append(_row("libfabric", "ok", OK, f"{fabric_lib['path']} (version {fabric_lib.get('version') or '?'}, "
                        f"ABI {fabric_lib.get('abi') or '?'})"))
    else:
        out.append(_row("libfabric", "unmapped", WARN, "the plugin mapped no libfabric.so.1",
                        "check that the plugin is aws-ofi-nccl (it links libfabric)"))
    return out


def _fi_checks(env: Mapping[str, str], needed: str, m: Machine) -> list[Check]:
    out = []
    if m.fi_providers is None:
        out.append(_row("fi-provider", "no-fi-info", WARN, f"no fi_info: cannot list libfabric's providers (needs "
                        f"{needed})", "inject the site's fi_info beside its libfabric (…/bin)"))
    elif needed not in m.fi_providers:
        out.append(_row("fi-provider", "missing", FAIL, f"libfabric has no {needed} provider (has "
                        f"{', '.join(m.fi_providers) or 'none'})", f"inject the site's libfabric built with {needed}"))
    elif needed not in m.fi_devices:
        out.append(_row("fi-provider", "no-device", FAIL, f"libfabric has the {needed} provider but `fi_info -p "
                        f"{needed}` finds no device in this container", f"pass the {needed} devices in (e.g. /dev/cxi* "
                        "or /dev/infiniband for EFA, or the device plugin's resource)"))
    else:
        out.append(_row("fi-provider", "ok", OK, f"libfabric has the {needed} provider and sees its device"))
    given = env.get("FI_PROVIDER")
    if given and m.fi_providers is not None and given not in m.fi_providers:
        out.append(_row("fi-provider-env", "unknown", FAIL, f"FI_PROVIDER={given} names a provider this libfabric "
                        f"lacks (has {', '.join(m.fi_providers) or 'none'})",
                        "unset FI_PROVIDER: aws-ofi-nccl picks it"))
    return out


def _verbs_plugin_checks(env: Mapping[str, str], fabric: FabricReport, m: Machine) -> list[Check]:
    """InfiniBand/RoCE: an external net plugin NCCL would load but nobody asked for (the SHARP
    plugin many images ship as libnccl-net.so), or one asked for that does not load."""
    record = by_name(fabric.fabric)
    if record is None or record.verbs_provider is None or record.fi_provider is not None:
        return []
    probe, given = m.net_probe or {}, env.get("NCCL_NET_PLUGIN")
    if given is not None and given.strip().lower() == "none":
        return [_row("net-plugin", "none", OK, "NCCL_NET_PLUGIN=none: NCCL uses its internal IB network")]
    if given is None and probe.get("loaded"):
        return [_row("net-plugin", "unwanted", WARN, f"NCCL_NET_PLUGIN is unset, so NCCL loads {probe.get('path')} "
                     f"(plugin {probe.get('plugin_name')!r}) ahead of its internal IB network",
                     "set NCCL_NET_PLUGIN=none unless you want this plugin (sites disable the SHARP plugin so)")]
    if given is not None and not probe.get("loaded"):
        errors = "; ".join(t["error"] for t in probe.get("tried") or ()) or probe.get("crashed") or "not found"
        return [_row("net-plugin", "not-loaded", FAIL, f"NCCL_NET_PLUGIN={given} names a plugin that does not "
                     f"load: {errors}", "install the plugin where the loader finds it, or unset NCCL_NET_PLUGIN")]
    if probe.get("loaded"):
        return [_row("net-plugin", "ok", OK, f"{probe.get('path')} loads (NCCL_NET_PLUGIN={given})")]
    return [_row("net-plugin", "none", OK, "no external net plugin: NCCL uses its internal IB network")]


def _nccl_env_checks(seen: Mapping[str, str], conf: Sequence[Finding], m: Machine) -> list[Check]:
    """The configuration files, names nobody reads, the driver and IMEX, judged on what NCCL sees."""
    checks = [Check("nccl-conf", f) for f in conf]
    unknown = names.unknown(seen)
    checks += [Check("env-name", f) for f in unknown]
    if not unknown:
        checks.append(_row("env-name", "ok", OK, "every NCCL_*/FI_* name set is one NCCL or libfabric reads, "
                           "or a label an image sets"))
    checks += [Check("env-name", f) for f in names.labels(seen)]
    version, why = driver.node_driver(m.proc_root)
    checks.append(Check("driver", driver.judge(version, why, m.cuda, m.cuda_why)))
    checks += [Check("imex", f) for f in imex.check(seen, m.root, m.proc_root)]
    return checks


def preflight(env: Mapping[str, str], m: Machine) -> tuple[FabricReport, list[Check]]:
    """Every check, judged on the environment NCCL will see (its configuration files merged)."""
    env, conf = ncclconf.merged(env, m.root)
    fabric = detect_fabric(env, m.sysfs_root, m.proc_root, m.root)
    name = fabric.fabric or "none"
    first = fabric.findings[0] if fabric.findings else None
    checks = [Check("fabric", Finding(first.code if first else "fabric.none", OK,
                                      f"{name}: {first.message}" if first else name))]
    checks += _rdma_checks(fabric, m)
    checks += _plugin_checks(env, fabric, m)
    checks += _verbs_plugin_checks(env, fabric, m)
    checks += _nccl_env_checks(env, conf, m)
    # the fabric's own findings, by code: a reworded message changes no row and no verdict
    checks += [Check(ROW_OF_TOPIC[f.topic], f) for f in fabric.findings[1:] if f.topic in ROW_OF_TOPIC]
    if m.shm_bytes is not None and m.shm_bytes < SHM_WANTED:
        checks.append(_row("shm", "small", WARN, f"/dev/shm is {_size(m.shm_bytes)}: NCCL's intra-node buffers may "
                           "not fit", "docker run --shm-size=8g, or an emptyDir with medium: Memory at /dev/shm"))
    elif m.shm_bytes is not None:
        checks.append(_row("shm", "ok", OK, f"/dev/shm is {_size(m.shm_bytes)}"))
    if not m.gpu_count:
        checks.append(_row("gpus", "none", WARN, "no GPU visible: NCCL cannot run here (gloo will)",
                           "run with the GPUs exposed (--gpus all, nvidia.com/gpu resources)"))
    else:
        checks.append(_row("gpus", "ok", OK, f"{plural(m.gpu_count, 'GPU')} visible"))
    slow = reverse_dns.finding(m.reverse_dns) if m.reverse_dns else None
    if slow:  # a row only when it costs time: c10d needs no name, only a prompt answer
        checks.append(Check("reverse-dns", slow))
    return fabric, checks


def _shown(text: str) -> str:
    """A log line as the text report shows it: characters that would move the cursor, end the
    line or drive the terminal (escape sequences) are written as escapes."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def report(checks: Sequence[Check], verdict: nccl_log.Verdict | None, fmt: str) -> str:
    if fmt == "json":
        data: dict = {"checks": [c.as_dict() for c in checks]}
        if verdict is not None:
            data.update(transport=verdict.transport, gdrdma=verdict.gdrdma, evidence=list(verdict.evidence),
                        nccl_version=verdict.nccl_version, log_notes=list(verdict.notes), network=verdict.network,
                        nodes=verdict.nodes)
        return json.dumps(data, indent=2)
    width = max(len(c.name) for c in checks)
    lines = [f"{c.status:4}  {c.name:{width}}  {c.detail}"
             + (f" | fix: {c.fix}" if c.fix and c.finding.severity is not OK else "")
             for c in checks]
    if verdict is not None:
        lines.append(f"transport: {verdict.transport}" + (" (GPUDirect RDMA)" if verdict.gdrdma else "")
                     + (f", NCCL {verdict.nccl_version}" if verdict.nccl_version else "")
                     + (f", network {_shown(verdict.network)}" if verdict.network else "")
                     + (f", {plural(verdict.nodes, 'node')}" if verdict.nodes else ""))
        lines += [f"  > {_shown(line.strip())}" for line in verdict.evidence] + [f"  note: {n}" for n in verdict.notes]
    return "\n".join(lines)


LOG_EXPECTED = "a log written with NCCL_DEBUG=INFO (lines with 'NCCL INFO')"


def read_log(path: str) -> nccl_log.Verdict:
    """The verdict for the log at ``path``, streamed line by line (torchpod.readers.Lines):
    a FIFO, device or directory is one line; a log of any size takes memory bounded by the
    line cap and time linear in its size."""
    what = f"--nccl-log={path!r}"
    lines = readers.Lines(path, what=what, expected=LOG_EXPECTED, line_cap=nccl_log.LINE_CAP)
    verdict = nccl_log.analyze(lines)
    if verdict is None:
        raise InputError(f"{what} holds no NCCL lines; expected {LOG_EXPECTED}")
    return verdict


def exit_code(fabric: FabricReport, checks: Sequence[Check], verdict: nccl_log.Verdict | None) -> int:
    """1 when a check's finding is FAIL, or sockets between nodes on a node where a fabric was
    found (a log whose every communicator spans one node sent nothing over its network)."""
    if any(c.finding.severity is FAIL for c in checks):
        return 1
    if verdict is not None and verdict.transport == "socket" and fabric.fabric is not None and verdict.nodes != 1:
        return 1
    return 0


def refusal(checks: Sequence[Check]) -> str | None:
    """For `torchpod run` under TORCHPOD_DOCTOR=1: one line when a check failed."""
    failed = [c for c in checks if c.finding.severity is FAIL]
    if not failed:
        return None
    return (f"{ENV_DOCTOR.name}=1 and the preflight failed: "
            + "; ".join(f"{c.name}: {c.detail} (fix: {c.fix})" for c in failed)
            + "; run `torchpod doctor` for every check")
