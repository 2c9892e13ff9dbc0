"""The one exception family torchpod raises for people to read.

A message names the variable or key, the value seen, the form expected and a hint.
``main`` functions print it as one line and exit with ``exit_code``: 2 for bad input,
1 for a runtime failure.
"""

from __future__ import annotations

# One line, bounded: a message quotes the value it refuses, and a value can be megabytes (a
# host file of one line, a MASTER_ADDR). Its start and its end (the form expected) are kept.
MESSAGE_HEAD, MESSAGE_TAIL = 1500, 500


class TorchpodError(Exception):
    """Bad input or a failed step, explained in one line."""

    exit_code = 2


class InputError(TorchpodError):
    """The user's input (environment, flags, definitions) is wrong."""

    exit_code = 2


class RuntimeFailure(TorchpodError):
    """Something the user asked for could not be done (engine down, build failed)."""

    exit_code = 1


def one_line(error: BaseException | str) -> str:
    """The message as torchpod prints it: one line (any run of whitespace, line breaks
    included, is one space) of at most about 2,000 characters; a longer one keeps its start
    and its end and says how much was left out."""
    text = " ".join(str(error).split())
    if len(text) <= MESSAGE_HEAD + MESSAGE_TAIL + 40:
        return text
    cut = len(text) - MESSAGE_HEAD - MESSAGE_TAIL
    noun = "character" if cut == 1 else "characters"  # a leaf: torchpod.words is not imported here
    return f"{text[:MESSAGE_HEAD]} ... [{cut} {noun} left out] ... {text[-MESSAGE_TAIL:]}"
