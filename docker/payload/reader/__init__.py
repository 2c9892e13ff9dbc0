"""A copy of the launcher's bounded reader (entrypoints/torchpod/readers.py and what it
imports), for docker/payload/shards.py, which runs in the image build without torchpod.
Written by `python3 -m torchpod_toolkit.imagebuild.payloadreader`; do not edit here.
"""
