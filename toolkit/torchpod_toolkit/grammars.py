"""The grammars torchpod checks values against, each written once: an OCI image reference
(a job's ``--image``, manifests.names.image_problem and manifests.policy; an image
definition's ``base.image`` and names, definitions), Kubernetes' object names (below the
reference grammar), the values typed on `invoke manifests`' command line, and resource
quantities (the API's, which the kubelet stand-in reads, and the parts of it torchpod
writes or models).

It is the grammar of the distribution project's reference package (distribution/reference,
regexp.go), which Docker, containerd and the kubelet parse references with, translated to
Python's ``re`` and matched with fullmatch over ASCII only (``$`` would accept a trailing
newline; ``\\w`` and ``\\d`` accept non-ASCII letters and digits):

- a name is an optional domain, then path components joined by ``/``: lower-case letters and
  digits with ``.``, ``_``, ``__`` or a run of ``-`` between them, at most 255 characters in
  all (NameTotalLengthMax);
- a domain is dot-separated labels of letters, digits and inner ``-``, or an IPv6 address in
  brackets, with an optional ``:port`` of ASCII digits (regexp.go's optionalPort,
  ``(?::[0-9]+)?``: the grammar sets no range, and neither does this one, so a reference is
  valid here exactly when it is valid to the tools that pull it; a port no registry listens
  on fails at the pull, naming the registry);
- a tag is a word character, then up to 127 word characters, ``.`` or ``-``;
- a digest is narrowed to the algorithms the OCI image spec registers (descriptor.md),
  each with its exact number of lower-case hex digits, where regexp.go takes any algorithm
  with 32 or more hex digits.

Nothing here reads a file or the environment; callers word their own messages.
"""

from __future__ import annotations

import re

_A = re.ASCII

_ALPHANUMERIC = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|-+)"
# One path component of a repository (also a definition file's stem: torchpod/<stem>).
PATH_COMPONENT = re.compile(rf"{_ALPHANUMERIC}(?:{_SEPARATOR}{_ALPHANUMERIC})*", _A)
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_IPV6 = r"\[[a-fA-F0-9:]+\]"
_OPTIONAL_PORT = r"(?::[0-9]+)?"
DOMAIN = re.compile(rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|{_IPV6}){_OPTIONAL_PORT}", _A)
NAME = re.compile(rf"(?:{DOMAIN.pattern}/)?{PATH_COMPONENT.pattern}(?:/{PATH_COMPONENT.pattern})*", _A)
NAME_MAX = 255
TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", _A)
TAG_MAX = 128
# The OCI image spec's registered digest algorithms, each with its exact lower-case hex length.
DIGEST_HEX = {"sha256": 64, "sha512": 128}
DIGEST = re.compile("|".join(f"{algorithm}:[0-9a-f]{{{n}}}" for algorithm, n in DIGEST_HEX.items()), _A)
# name[:tag][@digest], each part a named group.
# The longest reference that can match: a name, a tag and the longest digest.
REFERENCE_MAX = NAME_MAX + 1 + TAG_MAX + 1 + len("sha512:") + DIGEST_HEX["sha512"]
REFERENCE = re.compile(rf"(?P<name>{NAME.pattern})(?::(?P<tag>{TAG.pattern}))?(?:@(?P<digest>{DIGEST.pattern}))?",
                       _A)


def is_reference(value: object) -> bool:
    """Whether ``value`` is an image reference of the grammar above, its name within NAME_MAX."""
    if not isinstance(value, str) or len(value) > REFERENCE_MAX:  # bounded before the pattern runs
        return False
    match = REFERENCE.fullmatch(value)
    return match is not None and len(match["name"]) <= NAME_MAX


# --- paths a job binds --------------------------------------------------------------------

# An absolute path that goes into an Apptainer --bind, Docker -v, enroot --mount, pyxis
# --container-mounts or a pod's volume: those split on ',' and ':', and the path also reaches
# a shell and a comment, so only these characters are allowed.
BIND_PATH = re.compile(r"/[A-Za-z0-9/._+@-]*", _A)
BIND_PATH_CHARS = "letters, digits and / . _ + @ -"
BIND_PATH_MAX = 4096  # PATH_MAX
HEX = re.compile(r"[0-9a-f]+", _A)  # a digest's lower-case hex digits


# --- Kubernetes names (k8s.io/apimachinery pkg/util/validation/validation.go, v0.37) ---------

# IsDNS1123Label: a Namespace's or a node's name, at most 63
DNS1123_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?", _A)
DNS1123_LABEL_MAX = 63
# IsDNS1035Label: a Service's name, which must start with a letter (so does a TrainJob's, by its CEL rule)
DNS1035_LABEL = re.compile(r"[a-z](?:[-a-z0-9]*[a-z0-9])?", _A)
# IsDNS1123Subdomain: most objects' names, a label key's prefix, at most 253
DNS1123_SUBDOMAIN = re.compile(rf"{DNS1123_LABEL.pattern}(?:\.{DNS1123_LABEL.pattern})*", _A)
DNS1123_SUBDOMAIN_MAX = 253
# IsQualifiedName's name part (a label key after its prefix), at most 63
QUALIFIED_NAME = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?", _A)
QUALIFIED_NAME_MAX = 63
# IsValidLabelValue: empty, or a qualified name's form, at most 63
LABEL_VALUE = re.compile(rf"(?:{QUALIFIED_NAME.pattern})?", _A)


# --- values typed on `invoke manifests`' command line ---------------------------------------

# A count's ASCII digits (`\d` takes non-ASCII digits too).
DIGITS = re.compile(r"[0-9]+", _A)
# N or MIN:MAX (torchrun's --nnodes form): enough digits for any bound, few enough that int()
# never sees thousands of them (Python refuses more than 4300 with a ValueError).
COUNT_SPAN = re.compile(r"([0-9]{1,18})(?::([0-9]{1,18}))?", _A)
# A wall time, HH:MM:SS (hours unbounded up to five digits, which PBS and LSF take too).
WALLTIME = re.compile(r"([0-9]{1,5}):([0-5][0-9]):([0-5][0-9])", _A)
# Slurm's days form, D-HH:MM:SS (sbatch(1) --time "days-hours:minutes:seconds").
WALLTIME_DAYS = re.compile(r"([0-9]{1,3})-([0-9]{1,2}):([0-5][0-9]):([0-5][0-9])", _A)
# An environment variable's name, shell style, at most 128 characters.
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}", _A)
# The host of a bracketed IPv6 endpoint, [HOST]:PORT (its hex digits, ':' and '.').
IPV6_HOST = re.compile(r"[0-9a-fA-F:.]+", _A)
# A size as `invoke manifests` takes it (--memory-per-node): a whole number and a binary unit
# (Kubernetes' quantity suffixes Mi, Gi, Ti), so that no target reads it in another unit:
# Slurm's --mem, PBS's mem= and LSF's rusage[mem=] count in 1024s too (their M/G/T and mb/gb/tb).
BINARY_SIZE = re.compile(r"([1-9][0-9]{0,8})(Mi|Gi|Ti)", _A)


# --- packages an image definition and its locks pin ------------------------------------------

# Debian policy 5.6.7: lower case, digits, + - . ; at least two characters, starting alphanumeric.
DEBIAN_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]{1,99}", _A)
# Debian policy 5.6.12: [epoch:]upstream[-revision], as text to build a pattern from
DEBIAN_VERSION = r"(?:[0-9]{1,9}:)?[0-9][A-Za-z0-9.+~:-]{0,127}"
# NAME=VERSION, the form apt-get install takes
DEBIAN_PIN = re.compile(rf"{DEBIAN_PACKAGE.pattern}={DEBIAN_VERSION}", _A)
# A Python project's name, PEP 508's (packaging.utils: `^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$`,
# case-insensitive), at most 100 characters, as text to build a pattern from
PYTHON_PROJECT = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?"
# A sha256 digest's hex digits, as sha256sum prints them
SHA256_HEX = re.compile(r"[0-9a-f]{64}", _A)


# --- Kubernetes resource quantities -----------------------------------------------------------

# A quantity as the API takes it (k8s.io/apimachinery pkg/api/resource/quantity.go,
# ParseQuantity): a signed decimal number, then a decimal exponent (e3, E-2) or a suffix,
# binary (Ki ... Ei) or decimal (n, u, m, k, M, G, T, P, E), or none. Group 1 the number,
# group 2 the exponent, group 3 the suffix.
QUANTITY = re.compile(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
                      r"(?:([eE][+-]?[0-9]{1,3})|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)", _A)
# The part of it a CPU or GPU count is modelled in where a count must be rounded up (the
# Trainer's resourcesPerNode, resource.Quantity.Value()): a whole or decimal number, or millis.
# Group 1 the whole part, group 2 the decimals, group 3 "m" or "".
WHOLE_OR_MILLI = re.compile(r"([0-9]+)(?:\.([0-9]+))?(m?)", _A)
