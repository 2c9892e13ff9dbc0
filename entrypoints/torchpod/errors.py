"""The one exception family torchpod raises for people to read.

A message names the variable or key, the value seen, the form expected and a hint.
``main`` functions print it as one line and exit with ``exit_code``: 2 for bad input,
1 for a runtime failure.
"""

from __future__ import annotations


class TorchpodError(Exception):
    """Bad input or a failed step, explained in one line."""

    exit_code = 2


class InputError(TorchpodError):
    """The user's input (environment, flags, definitions) is wrong."""

    exit_code = 2


class RuntimeFailure(TorchpodError):
    """Something the user asked for could not be done (engine down, build failed)."""

    exit_code = 1
