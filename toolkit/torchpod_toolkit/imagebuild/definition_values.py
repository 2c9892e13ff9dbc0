"""The grammars an image definition's values are checked against, one function each.

Every value a definition gives is checked here against its grammar (a PEP 440 version, an
exact ``NAME==VERSION`` pin, an image reference, a URL, a sha256, a Debian package name, a
path inside the repository) and returned re-serialised from what was parsed, so no free text
reaches pip, a build arg, a tag or a path. A value that does not fit is one
:class:`~torchpod.errors.InputError` line naming the file, the key, the value (its ``repr``,
cut short) and the form expected. Pure: nothing here reads a file or touches Docker.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from torchpod.errors import InputError

from .. import grammars

# Grammars. All ASCII and matched with fullmatch (`$` would let a trailing newline through).
# A file stem becomes the repository path component `torchpod/<name>` (grammars.PATH_COMPONENT,
# capped); a tag is grammars.TAG.
PYTHON = re.compile(r"3\.[0-9]{1,2}")
CUDA = re.compile(r"[0-9]{1,3}\.[0-9]{1,3}")
NCCL = re.compile(r"[0-9]{1,3}(?:\.[0-9]{1,4}){1,3}")
# A requirement pinned exactly; the name is PEP 508's (grammars.PYTHON_PROJECT); the version
# is parsed separately as PEP 440.
_PIN = re.compile(rf"(?P<name>{grammars.PYTHON_PROJECT})==(?P<version>[!-~]{{1,64}})")
DEBIAN_RELEASE = re.compile(r"[a-z][a-z0-9]{0,31}")
PROVIDER = re.compile(r"[a-z0-9_]{1,32}")
# aws-ofi-nccl's PACKAGE_VERSION as its library reports it (plugin.PACKAGE_RE).
_PLUGIN_VERSION = re.compile(r"[0-9]{1,4}\.[0-9]{1,4}\.[0-9]{1,4}(?:-aws)?")
# RFC 3986's characters less the quote: no space or quote, so a URL is one word anywhere.
_URL = re.compile(r"[A-Za-z0-9._~:/?#\[\]@!$&()*+,;=%-]{1,2048}")
_TARBALL = re.compile(r"[A-Za-z0-9._+-]{1,255}(?:/[A-Za-z0-9._+-]{1,255}){0,31}")


def shown(value: Any, limit: int = 200) -> str:
    """``repr(value)``, cut short: a message stays one readable line for any value."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def bad(path: Path | None, key: str, value: Any, expected: str) -> InputError:
    """The one form of a bad value: file, key, the value seen, the form expected."""
    return InputError(f"{str(path) + ': ' if path else ''}{key}={shown(value)}; expected {expected}")


def checked(path: Path | None, key: str, value: Any, grammar: re.Pattern, expected: str) -> str:
    """``value`` when it is text ``grammar`` matches whole; else the one line naming ``expected``."""
    if not isinstance(value, str) or not grammar.fullmatch(value):
        raise bad(path, key, value, expected)
    return value


def check_version(path: Path | None, key: str, value: Any, example: str = "2.13.0") -> str:
    """A PEP 440 version, parsed by ``packaging`` and re-serialised.

    ``Version`` itself strips surrounding whitespace (packaging/version.py, VERSION_PATTERN
    between ``^\\s*`` and ``\\s*$``), so a trailing newline would pass it silently; a value
    is accepted only when it is already the normal form ``str(Version(value))`` gives, and
    the message then names that form.
    """
    from packaging.version import InvalidVersion, Version

    if not isinstance(value, str) or not re.fullmatch(r"[!-~]{1,64}", value):
        raise bad(path, key, value, f"a PEP 440 version such as {example!r} (ASCII, no spaces)")
    try:
        normal = str(Version(value))
    except InvalidVersion:
        raise bad(path, key, value, f"a PEP 440 version such as {example!r}") from None
    if normal != value:
        raise bad(path, key, value, f"a PEP 440 version in normal form: {normal!r}")
    return normal


def check_pin(path: Path, key: str, value: Any) -> tuple[str, str]:
    """``NAME==VERSION`` exactly: the canonical name (for duplicates) and the requirement."""
    from packaging.utils import canonicalize_name

    m = _PIN.fullmatch(value) if isinstance(value, str) else None
    if m is None:
        raise bad(path, key, value, "a wheel pinned exactly as NAME==VERSION, such as 'numpy==2.4.6' "
                                    "(a PEP 508 name, no spaces, markers or ranges)")
    version = check_version(path, key, m["version"], "2.4.6")
    return canonicalize_name(m["name"]), f"{m['name']}=={version}"


def check_url(path: Path, key: str, value: Any, schemes: tuple[str, ...]) -> str:
    if isinstance(value, str) and _URL.fullmatch(value):
        try:
            parts = urlsplit(value)
            port_ok = parts.port is None or parts.port > 0  # .port raises ValueError out of 0-65535
        except ValueError:  # an unclosed IPv6 bracket, a port that is not a number
            parts, port_ok = None, False
        if port_ok and parts is not None and parts.scheme in schemes and value.startswith(f"{parts.scheme}://") and (
                parts.netloc or parts.scheme == "file"):
            return value
    raise bad(path, key, value, f"a URL ({', '.join(schemes)}; RFC 3986 characters, no spaces or quotes)")


def check_sha256(path: Path | None, key: str, value: Any) -> str:
    return checked(path, key, value, grammars.SHA256_HEX, "64 lower-case hex digits (sha256sum's output)")


def check_plugin_version(path: Path | None, key: str, value: Any) -> str:
    return checked(path, key, value, _PLUGIN_VERSION,
                   "a release version such as '1.14.0' (MAJOR.MINOR.PATCH, optionally -aws)")


def check_image_ref(path: Path, key: str, value: Any) -> str:
    if not grammars.is_reference(value):  # distribution/reference's grammar (torchpod_toolkit.grammars)
        raise bad(path, key, value, "an image reference such as 'ubuntu:24.04' or "
                                    "'registry.example.com:5000/base/debian:12@sha256:<64 hex>'")
    return value


def torchvision_series(torch_version: str) -> str | None:
    """The torchvision minor series built for a torch release: torchvision 0.(N+15) goes
    with torch 2.N (pytorch/vision README, "Installation": 0.15 for 2.0 ... 0.24 for 2.9,
    0.28 for 2.13, 0.29 for 2.14). None for a version this rule does not cover."""
    m = re.match(r"2\.([0-9]{1,4})\.", torch_version + ".")
    return f"0.{int(m.group(1)) + 15}" if m else None


def check_torchvision(path: Path, torch_version: str, torchvision: str) -> str:
    series = torchvision_series(torch_version)
    if series is None:
        raise InputError(f"{path}: torch.version={torch_version!r}; expected a torch 2.x release such as \"2.13.0\"")
    if not re.fullmatch(rf"{re.escape(series)}(\.[0-9]+)?", torchvision):
        raise InputError(
            f"{path}: torch.torchvision={torchvision!r} does not match torch.version={torch_version!r}; "
            f"expected a torchvision {series}.x release (torchvision {series} is built for torch "
            f"{torch_version.rsplit('.', 1)[0]})"
        )
    return torchvision


def check_each(path: Path, values: list, dotted: str, grammar: re.Pattern, expected: str) -> tuple[str, ...]:
    """Each of a list's ``values`` :func:`checked`, named ``dotted[i]`` in a message."""
    return tuple(checked(path, f"{dotted}[{i}]", v, grammar, expected) for i, v in enumerate(values))


def check_tarball(path: Path, value: Any) -> Path:
    """A local tarball: relative to the repository root (the folder above images/), inside it."""
    expected = ("a relative path inside the repository such as 'vendor/aws-ofi-nccl-1.14.0.tar.gz' "
                "(letters, digits, '._+-' and '/', no '..')")
    if not isinstance(value, str) or not _TARBALL.fullmatch(value) or ".." in PurePosixPath(value).parts:
        raise bad(path, "aws_ofi_nccl.tarball", value, expected)
    root = path.parent.parent.resolve()
    resolved = (root / value).resolve()
    if not resolved.is_relative_to(root):  # a symlink out of the repository
        raise bad(path, "aws_ofi_nccl.tarball", value, expected + f"; it resolves to {str(resolved)!r}")
    return resolved
