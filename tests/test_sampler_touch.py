"""The worker's touch of a sample's inputs (``Sampler.touch``): every storage read, none changed, in a few
launches for a batched sample's many tensors."""

from __future__ import annotations

import pytest
import torch

from harness.worker.sampler import Sampler


def _kernels_launched(fn) -> int:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def test_touch_is_a_no_op_off_the_gpu():
    sampler = Sampler(torch.device("cpu"), None)
    data = (torch.arange(5, dtype=torch.uint8), "not a tensor", None)
    sampler.touch(data)
    assert torch.equal(data[0], torch.arange(5, dtype=torch.uint8))


@pytest.mark.gpu
def test_touch_reads_a_batched_sample_in_a_few_launches_and_changes_nothing():
    """50 inputs of 7 tensors each (as an nvfp4 sample has), with raw bytes that are NaN and infinity as
    float16, a view with an offset and a storage of an odd number of bytes: all read, none changed, in a
    handful of kernels (one read a tensor launched 350)."""
    dev = torch.device("cuda")
    sampler = Sampler(dev, None)
    g = torch.Generator(device=dev).manual_seed(0)
    inputs = []
    for _ in range(50):
        inputs.append(
            (
                torch.randint(0, 256, (1 << 16,), dtype=torch.uint8, device=dev, generator=g),
                torch.full((64,), 0x7C01, dtype=torch.int16, device=dev),  # float16 NaN, as words
                torch.full((64,), 0x7C00, dtype=torch.int16, device=dev),  # float16 infinity
                torch.randn(128, 64, device=dev, generator=g)[8:],  # a view with an offset
                torch.randint(0, 2, (32,), dtype=torch.bool, device=dev, generator=g),
                torch.randn(16, device=dev, generator=g).to(torch.bfloat16),
                torch.zeros(4, dtype=torch.float32, device=dev),
            )
        )
    odd = torch.arange(7, dtype=torch.uint8, device=dev)  # 7 bytes: read on its own
    before = [[t.clone() for t in data] for data in inputs] + [[odd.clone()]]
    flat = [t for data in inputs for t in data] + [odd, "not a tensor", 3]
    sampler.touch(flat)  # first use: the kernels load
    launched = _kernels_launched(lambda: sampler.touch(flat))
    assert 1 < launched <= 12, launched  # the norm's few launches and the odd storage's own read
    for data, kept in zip([*inputs, (odd,)], before):
        assert all(torch.equal(t, k) for t, k in zip(data, kept))
