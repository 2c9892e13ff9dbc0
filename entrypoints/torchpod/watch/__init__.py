"""The running job watched: a hang named with its culprit before anything is killed.

- ``judge``: pure; beats in, a suspicion and the verdict's lines out;
- ``worker``: the thread torchpod's sitecustomize starts in every worker (beats, judging,
  evidence, the verdict file);
- ``node``: what `torchpod run` does with a verdict its workers wrote (print it, the pod's
  termination message, end the job with EXIT_HANG).

Standard library only; the worker's thread uses the torch the script imported.
"""

# The exit code of a job torchpod ended on a hang verdict: timeout(1)'s, distinct from a
# crash (1), a refused input (2) and a signal (128 + N), so a scheduler's record shows a hang.
EXIT_HANG = 124
# torch's flight recorder: how many collectives each worker keeps (TORCH_FR_BUFFER_SIZE, or
# TORCH_NCCL_TRACE_BUFFER_SIZE; torch 2.13's torch/csrc/distributed/c10d/FlightRecorder.hpp
# reads it with 2000 as its default, for gloo and NCCL alike). Set explicitly, so the watch's
# evidence does not depend on the default of the torch installed.
FR_BUFFER_SIZE = "2000"
