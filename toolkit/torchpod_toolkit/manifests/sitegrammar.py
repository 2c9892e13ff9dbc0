"""The batch systems' own grammars for what a site types: job names, queue lists, node
features, host lists, switch counts, GPU models and passed-through directives. Pure.

Each value is held to the grammar of the tool that reads it (cited where it is defined) and
refused in one line naming the option, the value and the form expected: a directive line
is written into a script, so a value outside its grammar would change what the batch
system reads. What a kind takes is on its record (``JobKind.job_name``, ``queue_list``,
``gpu_model``); nothing here names a kind.
"""

from __future__ import annotations

import re

from torchpod.errors import InputError

from .. import grammars
from .kinds.record import JobKind, NameRule

_A = re.ASCII

# Kubernetes object names: the job name also names Services, so it is a DNS-1035 label
# (k8s.io/apimachinery pkg/util/validation IsDNS1035Label), held to 40 characters so that
# every pod an operator derives from it stays a label (spec.pod_name_room). A kind whose
# batch system has its own grammar declares it (JobKind.job_name).
DNS_NAME = NameRule(grammars.DNS1035_LABEL.pattern, 40, "a DNS label starting with a letter (lower-case letters, "
                                                         "digits, '-')")
# A queue, partition, account, QoS or reservation name: no scheduler's list separator in it
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*", _A)
NAME_MAX = 63
_FEATURE = re.compile(r"[A-Za-z0-9_.-]+(?:\*[1-9][0-9]{0,5})?", _A)
# a Slurm host list: names, each with an optional bracketed range list (scontrol show hostnames)
_HOSTLIST = re.compile(r"[A-Za-z0-9_.-]+(?:\[[0-9]+(?:-[0-9]+)?(?:,[0-9]+(?:-[0-9]+)?)*\])?"
                       r"(?:,[A-Za-z0-9_.-]+(?:\[[0-9]+(?:-[0-9]+)?(?:,[0-9]+(?:-[0-9]+)?)*\])?)*", _A)
# a directive passed through (--directive): one option, printable ASCII, one line
_DIRECTIVE = re.compile(r"-{1,2}[A-Za-z][A-Za-z0-9_-]*(?:[= ][ -~]{0,190})?", _A)
# A GPU model: Slurm's GRES type (sbatch(1) --gres "name[[:type]:count]", --gpus-per-node
# "[type:]number": no ':' or ',' in it) and LSF's gmodel ("gmodel=model_name[-mem_size]",
# bsub -gpu, LSF 10.1: no ':' either), e.g. h100, a100_80g or NVIDIAH100-80G
_GPU_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", _A)
# sbatch(1) --switches=<count>[@max-time], max-time in Slurm's time forms: minutes,
# minutes:seconds, hours:minutes:seconds, days-hours, days-hours:minutes, days-hours:minutes:seconds
_SWITCHES = re.compile(r"[1-9][0-9]{0,4}(?:@(?:[0-9]{1,6}(?::[0-5][0-9]){0,2}|[0-9]{1,3}-[0-9]{1,2}"
                       r"(?::[0-5][0-9]){0,2}))?", _A)
_SUBDOMAIN = grammars.DNS1123_SUBDOMAIN


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def check_job_name(value, kind: JobKind) -> None:
    """--name in the grammar of the system that reads it: the kind's own (JobKind.job_name),
    else a DNS label (Kubernetes objects, SkyPilot's task)."""
    rule = kind.job_name or DNS_NAME
    if not isinstance(value, str) or not re.fullmatch(rule.pattern, value, _A) or len(value) > rule.limit:
        raise InputError(f"--name={value!r}; expected {rule.form} of at most {rule.limit} characters "
                         f"(a {kind.name} job's name)")


def job_name_ok(value: str, kind: JobKind) -> bool:
    rule = kind.job_name or DNS_NAME
    return re.fullmatch(rule.pattern, value, _A) is not None and len(value) <= rule.limit


def queues(value: str, kind: JobKind) -> list[str]:
    """--queue's names: several, comma-separated, where the batch system takes a list
    (JobKind.queue_list), else one."""
    if not isinstance(value, str):
        raise InputError(f"--queue={value!r}; expected a queue or partition name")
    names = value.split(",") if kind.queue_list else [value]
    form = ("a queue or partition name" if not kind.queue_list
            else f"one {kind.name} queue or partition name, or several separated by ','")
    if len(names) > 16 or any(not _NAME.fullmatch(n) or len(n) > NAME_MAX for n in names):
        raise InputError(f"--queue={value!r}; expected {form} (each a letter or digit, then letters, digits, '_', "
                         f"'.', '-'; at most {NAME_MAX}{'; at most 16 names' if kind.queue_list else ''})")
    if len(set(names)) != len(names):
        raise InputError(f"--queue={value!r} names a queue twice; expected each once")
    return names


def constraint_ok(text: str) -> bool:
    """Whether ``text`` is in sbatch's --constraint grammar (sbatch(1), Slurm 22.05: AND '&', OR
    '|', a node count FEATURE*N, matching OR and multiple counts in one [...] that does not
    nest, grouping in (...)): a recursive descent over its tokens, so that brackets and
    parentheses balance and every operator joins two operands."""
    tokens = re.findall(r"[A-Za-z0-9_.-]+(?:\*[0-9]+)?|[&|()\[\]]|.", text)

    def expr(i: int, in_brackets: bool) -> int:
        i = operand(i, in_brackets)
        while i < len(tokens) and tokens[i] in ("&", "|"):
            i = operand(i + 1, in_brackets)
        return i

    def operand(i: int, in_brackets: bool) -> int:
        if i >= len(tokens):
            raise ValueError("an operand is missing")
        token = tokens[i]
        if token in ("(", "["):
            if token == "[" and in_brackets:
                raise ValueError("brackets do not nest")
            i = expr(i + 1, in_brackets or token == "[")
            if i >= len(tokens) or tokens[i] != {"(": ")", "[": "]"}[token]:
                raise ValueError("unbalanced")
            return i + 1
        if not _FEATURE.fullmatch(token):
            raise ValueError(f"not a feature: {token!r}")
        return i + 1

    try:
        return expr(0, False) == len(tokens)
    except ValueError:
        return False


def check_gpu_model(spec, kind: JobKind) -> None:
    """--gpu-model: a model the batch system selects GPUs by (JobKind.gpu_model), for a job
    that asks for GPUs."""
    if not spec.gpu_model:
        return
    if not isinstance(spec.gpu_model, str) or not _GPU_MODEL.fullmatch(spec.gpu_model):
        raise InputError(f"--gpu-model={spec.gpu_model!r}; expected the site's GPU type as its batch system names it "
                         "(Slurm's GRES type, LSF's gmodel): a letter or digit, then letters, digits, '_', '.', '-' "
                         "(at most 64), e.g. h100")
    if not spec.gpus_per_node:
        raise InputError(f"--gpu-model={spec.gpu_model} with --gpus-per-node 0: a model chooses the GPUs a job asks "
                         "for; expected --gpus-per-node N with it, or leave it out")


def check_site_fields(spec) -> None:
    """The account, QoS, reservation and constraint a batch system reads from a directive
    line, the hosts it leaves out, a passed-through directive, and the Kubernetes names
    (service account, priority class, pull secret)."""
    for name in ("account", "qos", "reservation"):
        value = getattr(spec, name)
        if value and (not isinstance(value, str) or not _NAME.fullmatch(value) or len(value) > NAME_MAX):
            raise InputError(f"{_flag(name)}={value!r}; expected a name of a letter or digit, then letters, digits, "
                             f"'_', '.', '-' (at most {NAME_MAX})")
    if spec.constraint and (not isinstance(spec.constraint, str) or len(spec.constraint) > 256
                            or not constraint_ok(spec.constraint)):
        raise InputError(f"--constraint={spec.constraint!r}; expected Slurm's constraint grammar: node features of "
                         "letters, digits, '_', '.', '-', each with an optional *COUNT, joined by '&' or '|', grouped "
                         "in (...) or one matching-OR [...], e.g. h100&ib, [ib1|ib2] or (a&b)|c (at most 256)")
    for directive in spec.directive:
        if not isinstance(directive, str) or len(directive) > 200 or not _DIRECTIVE.fullmatch(directive):
            shown = directive if not isinstance(directive, str) or len(directive) <= 60 else directive[:60] + "..."
            raise InputError(f"--directive={shown!r}; expected one option of the batch system's, printable ASCII on "
                             "one line starting with '-', e.g. --mail-type=END (at most 200 characters)")
    if spec.exclude and (not isinstance(spec.exclude, str) or len(spec.exclude) > 1024
                         or not _HOSTLIST.fullmatch(spec.exclude)):
        raise InputError(f"--exclude={spec.exclude!r}; expected a Slurm host list, e.g. gpu07 or node[01-04,09],gpu12")
    if spec.switches and (not isinstance(spec.switches, str) or not _SWITCHES.fullmatch(spec.switches)):
        raise InputError(f"--switches={spec.switches!r}; expected COUNT[@MAX-TIME] as sbatch takes it: a count of 1 "
                         "or more, then the longest wait in minutes, MM:SS, HH:MM:SS or D-HH[:MM[:SS]], e.g. 1 or "
                         "1@00:30:00")
    for name in ("service_account", "priority_class", "image_pull_secret"):
        value = getattr(spec, name)
        if value and (not isinstance(value, str) or not _SUBDOMAIN.fullmatch(value) or len(value) > 253):
            raise InputError(f"{_flag(name)}={value!r}; expected a Kubernetes object name (a DNS-1123 subdomain: "
                             "lower-case letters, digits, '-', '.'; at most 253)")
