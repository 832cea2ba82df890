"""The launch gate's flags, on the CPU (the gate itself runs only on a GPU)."""

from __future__ import annotations

import torch

from harness.worker.gate import _FLAG_STRIDE, _flag_pair


def test_each_gate_flag_is_16_byte_aligned_like_the_pointers_its_kernel_was_loaded_for():
    """A worker loads the gate kernel ahead for 16-byte-aligned pointers (gate.load_ahead); Triton
    compiles another kernel, on the gate's first launch, for a pointer that is not. With the flags one
    word apart, as they once were, the second of each pair was 4 bytes past an aligned one."""
    buffer = torch.zeros(2 * _FLAG_STRIDE, dtype=torch.int32)
    first, second = _flag_pair(buffer)
    assert buffer.data_ptr() % 16 == 0
    assert [first.data_ptr() % 16, second.data_ptr() % 16] == [0, 0], (first.data_ptr(), second.data_ptr())
    first.fill_(1)
    second.fill_(2)
    assert buffer.tolist().count(0) == 2 * _FLAG_STRIDE - 2, "the two flags overlap"
