"""A prepared check of the launcher on one real GPU: the doctor, the plan, one-node NCCL runs
and preflight, each step's verdict written to a folder.

    python bench/gpu_check.py --out DIR [--timeout-s 420] [--python PATH] [--rehearse]

For the few minutes a single-GPU Linux machine with PyTorch (CUDA) is at hand, with no
Docker and no network: it runs this checkout's launcher from source (``<repo>/entrypoints``
first on PYTHONPATH, ``python -m torchpod ...``) and records, per step, the argv, exit
code, wall seconds, the tails of stdout and stderr and a verdict (ok, failed, skipped with
the reason). The steps:

- ``nvidia-smi``: name, driver and memory per GPU (skipped when it is not on PATH);
- ``environment``: python, torch, ``torch.version.cuda``, the CUDA devices torch sees, NCCL's
  version, torchvision and numpy, in a child process (this script never imports torch);
- ``doctor``: ``torchpod doctor --format json`` (with a GPU its ``gpus`` row must say so);
- ``plan``: ``torchpod plan --format json``: one node, ``nproc_per_node`` = the GPUs torch sees;
- ``preflight-first``: ``TORCHPOD_PREFLIGHT=1 torchpod plan``: one node keeps the script;
- ``allreduce`` and ``ddp``: ``torchpod bench allreduce`` and ``torchpod run
  examples/ddp_resnet.py``, with NCCL_DEBUG=INFO and NCCL's log written under ``nccl/``; each
  rank's result line must name the nccl backend; then ``torchpod doctor --nccl-log`` on each
  log (``allreduce-nccl-log``, ``ddp-nccl-log``);
- ``preflight``: ``torchpod run -m torchpod.preflight`` on one node: it forms its NCCL group,
  then must refuse in one line (its pair rounds need 2 nodes or more);
- ``hang``: the hang watch with this machine's torch: two gloo ranks on the CPU
  (``CUDA_VISIBLE_DEVICES=`` hides the GPU), rank 1 stalled before the all-reduce
  (``examples/allreduce_check.py --stall-rank 1``), ``TORCHPOD_STALL_WINDOW=10``: the run
  must end 124 with the verdict naming rank 1 and its frame;
- ``watch-cost``: the DDP example on NCCL four times, the watch off, on, on, off
  (``TORCHPOD_STALL_WINDOW`` ``off`` and ``300``): each arm's steps/s and the ratio of the
  medians, on over off (recorded, not judged: one GPU's four runs are a figure, not a bound).

With no CUDA device the GPU steps are skipped ("no CUDA device visible") and the others run
(``--rehearse`` runs the GPU steps on the CPU with gloo, to prove this script before a GPU is
at hand). Every step has its own time limit inside ``--timeout-s`` (the whole check); a step
over it is stopped with its process tree (torchrun's workers run in sessions of their own).

Writes ``summary.json``, ``summary.txt`` (the table it prints), ``logs/<step>.stdout|stderr``,
``nccl/`` and the benches' own JSON under ``--out``, which must be new or an empty folder.
Exit codes: 0 a GPU and every step passed; 1 a step failed; 2 bad options (one line);
3 no CUDA device visible and nothing failed; 4 torch is not importable (one line).
Timing lives here, not in the tests.

This program reads the options, takes the steps and writes the report. Its helpers sit
beside it in bench/ and are imported by name: ``_gpu_steps`` (the steps, in order, and what
each runs), ``_gpu_judges`` (each step's output judged: pure) and ``_gpu_processes`` (a
command under a time limit, its process tree stopped, its logs read back). Like this script
they need only the standard library and the launcher's own standard-library modules, so a
copy of the checkout is all a GPU machine needs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import stat
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, NoReturn, Sequence

ROOT = Path(__file__).resolve().parents[1]
LAUNCHER = ROOT / "entrypoints"
sys.path.insert(0, str(LAUNCHER))  # the launcher modules the helpers import: standard library only, as this script

# The helpers beside this script (bench/ is sys.path[0] when it runs by path)
from _gpu_judges import FAILED, one_line  # noqa: E402
from _gpu_steps import Context, Step, run_steps  # noqa: E402

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NO_GPU, EXIT_NO_TORCH = 0, 1, 2, 3, 4
EXIT_CODES = {EXIT_OK: "a CUDA device was found and every step passed",
              EXIT_FAILED: "a step failed",
              EXIT_USAGE: "bad options: nothing ran",
              EXIT_NO_GPU: "no CUDA device visible; every step that could run passed",
              EXIT_NO_TORCH: "torch is not importable by the Python that runs the launcher"}
DEFAULT_TIMEOUT_S = 420  # 7 minutes: the whole check, inside a machine lent for a few more
RESERVE_S = 10.0  # kept back from the steps: stopping the last one (_gpu_processes.KILL_GRACE_S), writing


class UsageError(Exception):
    """Bad options: one line, exit 2."""


# -- the report and the options ----------------------------------------------------------------

def overall(steps: Sequence[Mapping[str, Any]], facts: Mapping[str, Any]) -> tuple[str, int]:
    """(the check's verdict, its exit code). No torch outranks a failure: nothing could run."""
    if "torch_error" in facts:
        return "no-torch", EXIT_NO_TORCH
    if any(s["verdict"] == FAILED for s in steps):
        return "failed", EXIT_FAILED
    if not facts.get("device_count"):
        return "no-gpu", EXIT_NO_GPU
    return "ok", EXIT_OK


def device_slug(name: str | None) -> str:
    """A folder-name form of a device name: ``NVIDIA H100 80GB HBM3`` -> ``nvidia-h100-80gb-hbm3``."""
    slug = re.sub(r"[^a-z0-9]+", "-", (name or "").lower(), flags=re.ASCII).strip("-")
    return slug[:60].strip("-") or "unknown"


def table(summary: Mapping[str, Any]) -> str:
    """summary.txt: the verdict, the device, then one row per step."""
    facts = summary.get("environment", {})
    torch = (f"torch {facts['torch']}, CUDA build {facts.get('cuda_build') or 'none'}, "
             f"NCCL {facts.get('nccl') or '?'}" if facts.get("torch") else "no torch")
    head = [f"torchpod GPU check: {summary['verdict']} (exit {summary['exit_code']}: "
            f"{EXIT_CODES.get(summary['exit_code'], '?')})",
            f"device: {one_line(summary.get('device') or 'none', 80)} ({summary.get('gpus', 0)} visible to torch); "
            f"{torch}; python {facts.get('python', '?')}",
            f"{summary.get('wall_s', 0):.1f} s of --timeout-s {summary.get('timeout_s', 0):.0f}"
            + ("; rehearsal: GPU steps run on the CPU" if summary.get("rehearse") else ""), ""]
    rows = [("step", "verdict", "exit", "wall s", "reason")]
    for s in summary["steps"]:
        code = "timeout" if s["timed_out"] else "-" if s["exit_code"] is None else str(s["exit_code"])
        rows.append((s["name"], s["verdict"], code, f"{s['wall_s']:.1f}", one_line(s["reason"])))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:>{widths[2]}}  {r[3]:>{widths[3]}}  {r[4]}".rstrip()
             for r in rows]
    return "\n".join(head + lines + ["", "raw output: logs/<step>.stdout, logs/<step>.stderr; NCCL logs: nccl/"])


def check_out(value: str) -> Path:
    """The folder ``--out`` names, absolute, when it is new or an empty folder; else one
    UsageError. A link is refused even to an empty folder: the check writes where it was
    told, and nothing it writes replaces a file (every file is created exclusively)."""
    expected = "expected a new or empty folder, e.g. --out /tmp/gpu-check"
    if not value or "\0" in value:
        raise UsageError(f"--out={value!r} is not a path; {expected}")
    path = Path(os.path.abspath(value))
    try:
        st = path.lstat()
    except FileNotFoundError:
        return path
    except OSError as exc:
        raise UsageError(f"--out={value!r} cannot be read ({exc.strerror or exc}); {expected}") from None
    if stat.S_ISLNK(st.st_mode):
        raise UsageError(f"--out={value!r} is a symbolic link; {expected}, not a link")
    if not stat.S_ISDIR(st.st_mode):
        kind = "a file" if stat.S_ISREG(st.st_mode) else "not a folder"
        raise UsageError(f"--out={value!r} is {kind}; {expected} (this check never overwrites)")
    try:
        entries = os.listdir(path)
    except OSError as exc:
        raise UsageError(f"--out={value!r} cannot be listed ({exc.strerror or exc}); {expected}") from None
    if entries:
        raise UsageError(f"--out={value!r} is a folder with {len(entries)} entries; {expected} "
                         "(this check never overwrites)")
    return path


def parse_timeout(text: str) -> float:
    if not re.fullmatch(r"[0-9]{1,5}", text, flags=re.ASCII) or not 30 <= int(text) <= 3600:
        raise UsageError(f"--timeout-s={text!r} is not a time limit; expected whole seconds from 30 to 3600, "
                         f"e.g. {DEFAULT_TIMEOUT_S}")
    return float(text)


def summarise(ctx: Context, steps: Sequence[Step], started: str, wall_s: float, limit_s: float) -> dict:
    data = [s.as_dict() for s in steps]
    verdict, code = overall(data, ctx.facts)
    smi = ctx.done.get("nvidia-smi")
    named = (ctx.facts.get("devices") or [g["name"] for g in (smi.facts.get("gpus", []) if smi else [])] or [None])
    return {"check": "bench/gpu_check.py", "verdict": verdict, "exit_code": code,
            "exit_codes": {str(k): v for k, v in EXIT_CODES.items()}, "device": named[0],
            "device_slug": device_slug(named[0]) if named[0] else None, "gpus": ctx.gpus,
            "started": started, "wall_s": round(wall_s, 2), "timeout_s": limit_s, "rehearse": ctx.rehearse,
            "python": ctx.python, "launcher": str(LAUNCHER), "environment": dict(ctx.facts), "steps": data}


USAGE = "gpu_check.py --out DIR [--timeout-s N] [--python PATH] [--rehearse]"


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one UsageError line (a usage block and exit 2 would be several)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message}; expected {USAGE}")


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = _Parser(prog="gpu_check.py", usage=USAGE,
                     description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--out", required=True, help="a new or empty folder for summary.json, summary.txt and logs")
    parser.add_argument("--timeout-s", default=str(DEFAULT_TIMEOUT_S),
                        help=f"the whole check's limit in seconds, 30 to 3600 (default {DEFAULT_TIMEOUT_S})")
    parser.add_argument("--python", default=sys.executable, help="the Python with torch that runs the launcher")
    parser.add_argument("--rehearse", action="store_true", help="with no GPU, run the GPU steps on the CPU (gloo)")
    args = parser.parse_args(list(argv))
    args.timeout_s = parse_timeout(args.timeout_s)
    python = shutil.which(args.python)
    if python is None:
        raise UsageError(f"--python={args.python!r} is not an executable; expected a Python with torch, "
                         "e.g. --python /usr/bin/python3")
    args.python = python
    args.out = check_out(args.out)
    return args


def _write(out: Path, summary: dict) -> str:
    text = table(summary)
    with open(out / "summary.json", "x") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    with open(out / "summary.txt", "x") as f:
        f.write(text + "\n")
    return text


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    environ = dict(os.environ if env is None else env)
    try:
        args = parse(sys.argv[1:] if argv is None else argv)
        (args.out / "logs").mkdir(parents=True, exist_ok=True)
    except UsageError as exc:
        print(f"gpu_check: error: {one_line(exc, 400)}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"gpu_check: error: --out cannot be created ({exc.strerror or exc}); expected a new or empty folder "
              "under a writable one", file=sys.stderr)
        return EXIT_USAGE
    pythonpath = os.pathsep.join([str(LAUNCHER), *([environ["PYTHONPATH"]] if environ.get("PYTHONPATH") else [])])
    ctx = Context(args.out, args.python, {**environ, "PYTHONPATH": pythonpath, "PYTHONUNBUFFERED": "1"},
                  time.monotonic() + args.timeout_s - RESERVE_S, args.rehearse)
    started, t0 = datetime.now(timezone.utc).isoformat(timespec="seconds"), time.monotonic()
    try:
        steps = run_steps(ctx)
    except KeyboardInterrupt:
        steps = list(ctx.done.values()) + [Step("interrupted", "Ctrl-C", FAILED, "interrupted before the end")]
    summary = summarise(ctx, steps, started, time.monotonic() - t0, args.timeout_s)
    print(_write(args.out, summary))
    if summary["exit_code"] == EXIT_NO_TORCH:
        print(f"gpu_check: error: torch is not importable by {args.python} "
              f"({one_line(ctx.facts['torch_error'], 160)}); expected PyTorch with CUDA, or --python naming the "
              "Python that has it", file=sys.stderr)
    elif summary["device_slug"] and summary["gpus"]:
        print(f"gpu_check: to keep it: cp -r {args.out} bench/results/gpu-check-{summary['device_slug']} "
              "(read the logs for host names first)", file=sys.stderr)
    return summary["exit_code"]


if __name__ == "__main__":
    sys.exit(main())
