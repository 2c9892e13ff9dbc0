"""Shell words for the batch scripts, quoted by construction: every value a script holds is
one word that bash reads back exactly as given (``quote``), and the only unquoted text is
one of torchpod's own expansions (``Sh``), each a double-quoted variable the batch shell
fills in. A value can therefore never run as code, split into two words or start a new
line of the file, whatever characters it holds.
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING

from . import jobs, sitegrammar

if TYPE_CHECKING:  # the writers take a checked spec; spec.py imports no writer
    from .spec import JobSpec

# The container's working directory: the submit directory is bound there.
WORKDIR = "/workspace"

# docker run as the user who submitted the job (numeric, as the batch shell knows them): the
# files the job writes in the submit directory stay theirs, and the container is not root.
USER_IDS = '"$(id -u):$(id -g)"'
# The only text a script holds unquoted: torchpod's own expansions, each a double-quoted
# variable the batch shell fills in. No user value is ever one of them.
# Each batch kind's job id and node file (its record) are among them.
EXPANSIONS = frozenset({'"$SIF"', '"$SQSH"', '"$RC"', '"$PART"', '"$NNODES"', '"$PBS_O_WORKDIR"', f'"$PWD:{WORKDIR}"',
                        '"$PWD"', '"$PATH"', '"$STATUS"', '"$LSB_DJOB_HOSTFILE"', USER_IDS,
                        *(f'"${k.job_id}"' for k in jobs.KINDS if k.job_id),
                        *(f'"${k.node_file}:${k.node_file}{ro}"' for k in jobs.KINDS if k.node_file
                          for ro in (":ro", ""))})

# Line 2 of every script (a directive right after the shebang covers the whole file):
# SC2016 warns of '$x' in single quotes and SC1003 of '\' (a word that is one backslash),
# which is exactly how shlex.quote hands such an argument to torchpod.
SHELLCHECK = "# shellcheck disable=SC2016,SC1003  # single-quoted words reach torchpod as written, on purpose"

SAFE = re.compile(r"[A-Za-z0-9@%+=:,./_-]+", re.ASCII)  # shlex.quote's set: no quoting needed
_ESCAPES = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


class Sh(str):
    """A token the batch shell expands (``"$SIF"``): written as is, so only the fixed
    EXPANSIONS are allowed; anything else is a bug in the script writers, never user input."""

    def __new__(cls, text: str) -> "Sh":
        if text not in EXPANSIONS:
            raise ValueError(f"Sh({text!r}): only torchpod's own expansions {sorted(EXPANSIONS)} go unquoted")
        return super().__new__(cls, text)


class Cat(tuple):
    """One shell word joined, with no space, from literal text (quoted) and Sh expansions:
    ``Cat('--container-image=', Sh('"$SQSH"'))`` is ``--container-image="$SQSH"``."""

    def __new__(cls, *parts) -> "Cat":
        return super().__new__(cls, parts)


def quote(word: str, *, ascii_only: bool = False) -> str:
    r"""One shell word that bash reads back as exactly ``word``.

    Printable text gets shlex.quote. A word with a control character (a newline, CR, ...)
    gets bash's ANSI-C quoting, ``$'...'`` with ``\n``, ``\r``, ``\t``, ``\xNN`` (bash(1),
    QUOTING), so a value never starts a new line of the file. With ``ascii_only`` every
    character outside printable ASCII is escaped too (``\uNNNN``, ``\UNNNNNNNN``): the form
    of the Regenerate comment, which must not hold U+0085, U+2028 or U+2029 raw either.
    Scripts keep non-ASCII text raw (UTF-8 inside quotes, C1 controls included): bash passes
    those bytes through whatever the node's locale, where ``\u`` depends on it (bash 5.2
    under LC_ALL=C writes ``$'\u0085'`` back as the six characters)."""
    if SAFE.fullmatch(word):
        return word
    plain = all(" " <= ch <= "~" or (not ascii_only and ch >= "\x80") for ch in word)
    if plain:
        return shlex.quote(word)
    out = []
    for ch in word:
        code = ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif code < 0x20 or code == 0x7F or (ascii_only and 0x80 <= code):
            out.append(f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            out.append(ch)
    return "$'" + "".join(out) + "'"


def word(part) -> str:
    """A literal quoted, an Sh expansion as written, a Cat joined from its parts."""
    if isinstance(part, Sh):
        return str(part)
    if isinstance(part, Cat):
        return "".join(word(p) for p in part)
    return quote(part)


def line(argv) -> str:
    """One shell command line: every word quoted by construction."""
    return " ".join(word(a) for a in argv)


def job_name(spec: JobSpec) -> str:
    """The job's name, written into directive lines and file names as is: spec.check held it
    to its kind's grammar (sitegrammar.check_job_name), whose characters need no quoting;
    re-checked so no script writer depends on a caller having checked."""
    if not sitegrammar.job_name_ok(spec.name, jobs.kind(spec.scheduler)) or not SAFE.fullmatch(spec.name):
        raise ValueError(f"job name {spec.name!r} reached hpc.py unchecked")
    return spec.name
