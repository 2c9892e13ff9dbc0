"""torchpod.fabric.hca: NCCL_IB_HCA's syntax as NCCL reads it (prefix, '=' exact, '^' exclude,
':port')."""

from __future__ import annotations


def test_hca_syntax_as_nccl_reads_it():
    from torchpod.fabric import hca

    assert hca.selects("mlx5_1", "mlx5_10", 1)  # a prefix without '='
    assert not hca.selects("=mlx5_1", "mlx5_10", 1)
    assert not hca.selects("^=mlx5_0", "mlx5_0", 1) and hca.selects("^mlx5_0", "mlx5_1", 1)
    assert hca.selects("=mlx5_0:1", "mlx5_0", 1) and not hca.selects("=mlx5_0:2", "mlx5_0", 1)
    assert hca.value([("mlx5_0", 1), ("mlx5_1", 2)]) == "=mlx5_0,mlx5_1:2"
