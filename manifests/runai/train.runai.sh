#!/bin/bash
# shellcheck disable=SC2016,SC1003  # single-quoted words reach torchpod as written, on purpose
# torchpod runai job 'train': 2 nodes x 8 GPUs, image registry.example.com/torchpod/pytorch:2.13.0-cuda13.0
# Regenerate: invoke manifests --scheduler runai --nodes 2 --image registry.example.com/torchpod/pytorch:2.13.0-cuda13.0 --gpus-per-node 8 --name train -- /opt/torchpod/examples/ddp_resnet.py --steps 200
# The Run:ai CLI line for the job; train.runai.yaml is the PyTorchJob it corresponds to.
# Flags as in the Run:ai CLI reference (`runai training pytorch submit`, v2.18+).
exec runai training pytorch submit train \
  -p team-a \
  -i registry.example.com/torchpod/pytorch:2.13.0-cuda13.0 \
  --workers 1 \
  -g 8 \
  --cpu-core-request 64 \
  --cpu-core-limit 64 \
  --cpu-memory-request 256Gi \
  --cpu-memory-limit 256Gi \
  --large-shm \
  --command \
  -- torchpod run -- /opt/torchpod/examples/ddp_resnet.py --steps 200
