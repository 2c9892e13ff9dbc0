"""The Regenerate line of a rendered file's header, both ways: ``invoke_line`` writes the
`invoke manifests` command that renders the same files again, and ``parse_invoke_line``
reads one back into the JobSpec it asks for (``invoke manifests --refresh`` and the tests
re-render every worked example from it). The line's words are quoted with every character
outside printable ASCII escaped (shellwords.quote, ascii_only), so no value can end the
comment line; the reader takes exactly that quoting and refuses anything else in one line.
"""

from __future__ import annotations

import re
from typing import Any

from torchpod.errors import InputError

from .shellwords import quote
from .spec import JobSpec, default, flag, option_text, options, parse_counts, required


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
    return " ".join(quote(a, ascii_only=True) for a in [*argv, "--", *spec.command])


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
    it: exactly the escapes shellwords.quote writes, anything else refused."""
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
    """The words of a Regenerate line, as bash would read them, for the quoting shellwords.quote
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
