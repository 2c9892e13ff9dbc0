"""torchpod: reference images and a scheduler-aware launcher for multi-node PyTorch."""

__version__ = "0.1.0"
