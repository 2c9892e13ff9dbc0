"""``invoke manifests``, from the task's options to the job: checked, rendered, written or
printed, and submitted. tasks.py declares the task (its flags from ``options.cli_options``)
and hands its options here whole, so a render walks from the task into this room once.

- ``refresh``: every example under ``manifests/`` rendered again from its own Regenerate
  line, all of them first (a bad one stops the run before anything is written), then written;
- ``run``: one job from the options and the command after ``--``. Without ``out`` the job's
  file goes to ``stdout`` (a pipe into ``kubectl apply -f -`` or ``sbatch``) and its notes to
  ``stderr``; with it, the files are written (an edited file kept unless ``force``), and
  ``submit`` hands the job file to the scheduler's tool. Every check runs before a file is
  written.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Mapping, Sequence, TextIO

from torchpod import readers
from torchpod.errors import InputError, TorchpodError

from . import outfiles, regenerate
from . import render as render_mod
from .options import cli_options, given_defaults
from .spec import JobSpec

EXAMPLE_CAP = readers.DATA_CAP  # one rendered job file: a few KiB


def refresh(examples_root: Path, out: TextIO | None = None) -> None:
    """Every example under ``examples_root`` (but README.md) rendered again from its own
    Regenerate line and written; paths printed (to ``out``, else the standard output at the
    time of the call) relative to the folder above it."""
    out = sys.stdout if out is None else out
    # every entry but a folder: the reader refuses, in one line, what is not a regular file (a
    # FIFO is never opened for reading, where it would wait for a writer)
    examples = sorted(p for p in examples_root.rglob("*") if not p.is_dir() and p.name != "README.md")
    shown = examples_root.parent
    fresh: dict[Path, list] = {}
    for path in examples:
        text = readers.read_text(path, what=str(path.relative_to(shown)), cap=EXAMPLE_CAP,
                                 expected="a job file `invoke manifests` wrote, with its Regenerate line")
        try:
            spec = regenerate.parse_invoke_line(regenerate.regenerate_line(text))
            fresh.setdefault(path.parent, []).extend(render_mod.render(spec))
        except TorchpodError as exc:
            raise type(exc)(f"{path.relative_to(shown)}: {exc}") from None
    for folder, outputs in fresh.items():
        unique = list({o.name: o for o in outputs}.values())
        for path, changed in outfiles.write(folder, unique, force=True):
            print(f"{'wrote' if changed else 'unchanged'} {path.relative_to(shown)}", file=out)


def spec_of(opts: Mapping[str, Any], command: Sequence[str]) -> JobSpec:
    """The job the task's options and the command after ``--`` describe (not yet checked)."""
    given, explicit = given_defaults({name: opts[name] for name, _, _ in cli_options()})
    fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in given.items()}
    return JobSpec(command=tuple(command), explicit=explicit, **fields)


def run(opts: Mapping[str, Any], command: Sequence[str], out: TextIO | None = None,
        err: TextIO | None = None) -> int:
    """One job written, printed or submitted; the submitting tool's exit code (0 otherwise).
    ``out`` and ``err``: by default the standard output and error at the time of the call."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    if opts["submit"] and not opts["out"]:
        raise InputError("--submit submits the file it writes; expected --out DIR too (the folder the job is "
                         "submitted from)")
    spec = spec_of(opts, command)
    outputs = render_mod.render(spec, piped=not opts["out"])  # raises on bad input before anything is written
    if not opts["out"]:
        text, notes = render_mod.printed(outputs)
        out.write(text)
        for note in notes:
            print(f"torchpod: {note}", file=err)
        return 0
    written = outfiles.write(opts["out"], outputs, force=opts["force"])
    for path, changed in written:
        print(f"{'wrote' if changed else 'unchanged'} {path}", file=out)
    for note in render_mod.notices(outputs):
        print(f"torchpod: {note}", file=err)
    if not opts["submit"]:
        return 0
    from . import jobs, submit

    suffix = f".{jobs.kind(spec.scheduler).suffix}"
    (job_file,) = [p for p, _ in written if p.name == f"{spec.name}.{spec.scheduler}{suffix}"]
    return submit.submit(spec, job_file)
