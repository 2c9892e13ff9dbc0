"""The names a job carries and what it runs, each in its grammar: the job's name, namespace
and Run:ai project, the image, the command (or preflight's options) and the environment
set on every node. Pure; each function raises one InputError naming the flag.
"""

from __future__ import annotations

import re
from dataclasses import replace

from torchpod import preflight_options
from torchpod.arch import normalise_arch
from torchpod.contract import ENV_COMMAND, ENV_PRESET, GPU_VARS, SCHEDULER_VARS
from torchpod.errors import InputError

from .. import grammars
from . import jobs, sitegrammar
from .jobspec import JobSpec

# What the job runs: the user's command, or torchpod.preflight alone (docs/launcher.md#preflight).
WORKLOADS = ("train", "preflight")



def check_label(flag: str, value, pattern: re.Pattern, limit: int, form: str) -> None:
    """``value`` a name of ``pattern`` of at most ``limit`` characters (``form`` says which)."""
    if not isinstance(value, str) or not pattern.fullmatch(value) or len(value) > limit:
        raise InputError(f"{flag}={value!r}; expected {form} of at most {limit} characters "
                         "(lower-case letters, digits, '-')")


def check_names(spec: JobSpec) -> JobSpec:
    """--name in its kind's grammar (sitegrammar), --namespace and --project DNS-1123 labels."""
    sitegrammar.check_job_name(spec.name, jobs.kind(spec.scheduler))
    check_label("--namespace", spec.namespace, grammars.DNS1123_LABEL, 63, "a DNS-1123 label")
    check_label("--project", spec.project, grammars.DNS1123_LABEL, 63, "a Run:ai project name (a DNS-1123 label)")
    return spec


def image_problem(image: str) -> str | None:
    """Why ``image`` is not a valid, pinned reference (distribution/reference grammar,
    torchpod_toolkit.grammars.REFERENCE; a version tag or a digest, never ``latest``), else None."""
    if not isinstance(image, str) or not image:
        return "is empty; expected REGISTRY/torchpod/pytorch:TAG or @sha256:DIGEST"
    whole = grammars.REFERENCE.fullmatch(image) if len(image) <= grammars.REFERENCE_MAX else None
    if whole is None or len(whole["name"]) > grammars.NAME_MAX:
        return _part_problem(image)
    if whole["digest"]:
        return None
    if not whole["tag"]:
        return "has no tag; expected REGISTRY/torchpod/pytorch:TAG or @sha256:DIGEST"
    if whole["tag"] == "latest":
        return "uses the 'latest' tag, which moves; pin a version tag or @sha256:DIGEST"
    return None


def _part_problem(image: str) -> str:
    """Which part of ``image``, no reference of the grammar, is wrong: the digest after '@',
    the tag after the last path component's ':', or the name, checked in that order against
    their grammars so that the message names the part to fix."""
    rest, at, digest = image.partition("@")
    if at:
        algorithm, colon, hex_ = digest.partition(":")
        want = grammars.DIGEST_HEX.get(algorithm)
        if not colon or want is None:
            return (f"has digest {digest!r}; expected sha256:<64 lower-case hex digits> "
                    "(or sha512:<128>)")
        if len(hex_) != want or not grammars.HEX.fullmatch(hex_):
            return f"has digest {digest!r}; expected {algorithm}:<{want} lower-case hex digits>"
    if ":" in rest.rsplit("/", 1)[-1] and not grammars.TAG.fullmatch(rest.rsplit(":", 1)[1]):
        return (f"has tag {rest.rsplit(':', 1)[1]!r}; expected a tag of at most 128 characters: letters, digits, "
                "'_', '.', '-', not starting with '.' or '-'")
    return ("is not an image reference; expected [REGISTRY[:PORT]/]PATH[:TAG][@sha256:DIGEST] with a "
            "lower-case path of letters, digits and '.', '_', '-' separators (no spaces)")


def image_arch(image: str) -> str | None:
    """The architecture a per-arch tag names (torchpod's ``VERSION-x86_64``/``-aarch64``, or
    the amd64/arm64 spellings), else None: a multi-arch tag or a bare digest names none."""
    name = image.partition("@")[0].rsplit("/", 1)[-1]
    if ":" not in name:
        return None
    try:
        return normalise_arch(name.rsplit(":", 1)[1].rsplit("-", 1)[-1]).name
    except InputError:
        return None


def check_image(spec: JobSpec) -> JobSpec:
    """--image given, and a pinned reference (image_problem)."""
    if spec.image == "":
        raise InputError("--image is required; expected the image the nodes pull, REGISTRY/PATH/NAME:TAG or "
                         "REGISTRY/PATH/NAME@sha256:DIGEST (`invoke push` prints the latter)")
    problem = image_problem(spec.image)
    if problem:
        raise InputError(f"--image={spec.image!r} {problem}")
    return spec


def check_command(command, *, empty_ok: bool = False) -> tuple[str, ...]:
    """The script and its arguments (or, ``empty_ok``, preflight's options, maybe none): any
    text, carried exactly, except what no target can hold: NUL (an argv entry ends there)
    and lone surrogates (not encodable as UTF-8)."""
    if not command and empty_ok:
        return ()
    if not command:
        raise InputError("no training script given; expected `-- train.py [ARGS...]` after the options")
    words = tuple(command)
    for i, word in enumerate(words):
        what = "the training script" if i == 0 else f"script argument {i}"
        if not isinstance(word, str):
            raise InputError(f"{what} is {word!r}; expected text")
        if "\0" in word:
            raise InputError(f"{what} {word!r} holds a NUL character, which no argv can carry; remove it")
        try:
            word.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(f"{what} {word!r} is not valid Unicode text (a lone surrogate, e.g. from "
                             "undecodable bytes); expected UTF-8 text") from None
    if not words[0]:
        raise InputError("the training script is ''; expected `-- train.py [ARGS...]` with a non-empty script")
    return words


def check_workload(spec: JobSpec) -> JobSpec:
    """--workload known, and what follows `--` its: the training command (check_command), or
    preflight's options as every worker will read them (torchpod.preflight_options.check_options)."""
    if spec.workload not in WORKLOADS:
        raise InputError(f"--workload={spec.workload!r} is unknown; expected one of {', '.join(WORKLOADS)}")
    command = check_command(spec.command, empty_ok=spec.workload == "preflight")
    if spec.workload == "preflight":  # its options, as every worker will read them
        try:
            preflight_options.check_options(command)
        except InputError as exc:
            raise InputError(f"--workload preflight, the options after `--`: {exc}") from None
    return replace(spec, command=command)


# Names a job's environment must leave to the job and its scheduler: what the launcher's
# detectors and torchrun read (a user's value would be a second, wrong answer), the GPU
# selection, and what the manifests set themselves (--preset names the preset).
RESERVED_ENV = frozenset({*(n for names in SCHEDULER_VARS.values() for n in names), *GPU_VARS,
                          "NVIDIA_DRIVER_CAPABILITIES", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK",
                          "LOCAL_RANK", "NODE_RANK", ENV_PRESET.name, ENV_COMMAND})


def check_env(items) -> tuple[str, ...]:
    """--env NAME=VALUE, each: a shell-style NAME not reserved (RESERVED_ENV, PET_*) and not
    given twice, and any VALUE an argv can carry (no NUL, valid Unicode)."""
    seen: set[str] = set()
    for item in items:
        if not isinstance(item, str) or "=" not in item:
            raise InputError(f"--env={item!r}; expected NAME=VALUE, e.g. --env NCCL_DEBUG=INFO")
        name, _, value = item.partition("=")
        if not grammars.ENV_NAME.fullmatch(name):
            raise InputError(f"--env={item[:80]!r} has name {name[:80]!r}; expected letters, digits and '_', not "
                             "starting with a digit (at most 128)")
        if name in RESERVED_ENV or name.startswith("PET_"):
            raise InputError(f"--env={name}=...: {name} is set by the job and its scheduler, and torchpod reads it; "
                             "expected another name (--preset, --nodes and torchrun's options say what it holds)")
        if name in seen:
            raise InputError(f"--env {name} is given twice; expected each name once")
        seen.add(name)
        if "\0" in value:
            raise InputError(f"--env {name}: its value holds a NUL character, which no environment can carry; "
                             "remove it")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(f"--env {name}: its value is not valid Unicode text (a lone surrogate, e.g. from "
                             "undecodable bytes); expected UTF-8 text") from None
    return tuple(items)


def check_job_env(spec: JobSpec) -> JobSpec:
    """--env, each in its grammar (check_env), kept as a tuple."""
    return replace(spec, env=check_env(spec.env))
