"""torchpod's launcher: what runs inside every image (the ENTRYPOINT).

Standard library only (torch is imported by ``torchpod.torchrun`` and ``torchpod.probe``,
in the image). The build-host toolkit is the separate package ``torchpod_toolkit``, which
this package never imports (ARCHITECTURE.md).
"""

__version__ = "0.2.0"
