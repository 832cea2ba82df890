"""protocol.input_fingerprints: the sum, modulo 2^64, of each tensor's whole storage as int64 words (and
its last bytes one by one), however the tensor views it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harness import protocol


def _by_hand(t: torch.Tensor) -> int:
    raw = bytes(t.untyped_storage())
    words = len(raw) // 8
    total = sum(int(w) for w in np.frombuffer(raw[: 8 * words], dtype="<i8")) + sum(raw[8 * words :])
    return (total + 2**63) % 2**64 - 2**63  # as a signed int64


_BASE = torch.randint(-100, 100, (6, 10), dtype=torch.int8, generator=torch.Generator().manual_seed(1))
VIEWS = {
    "whole": _BASE,
    "rows from the second": _BASE[1:],
    "a column slice": _BASE[:, 2:5],
    "transposed": _BASE.t(),
    "every other row": _BASE[::2],
    "float4 pairs": _BASE.view(torch.float4_e2m1fn_x2),
    "a transposed float view": torch.randn(5, 3, generator=torch.Generator().manual_seed(2))[1:].t(),
    "7 bytes (a tail)": torch.arange(7, dtype=torch.uint8)[2:],
    "12 bytes (a word and a tail)": torch.arange(3, dtype=torch.int32) * 1000,
    "words past int64 (the sum wraps)": torch.full((5,), 2**62 + 12345, dtype=torch.int64),
    "bfloat16, 3 elements (a tail)": torch.randn(3, generator=torch.Generator().manual_seed(3)).to(torch.bfloat16),
}


@pytest.mark.parametrize("name", list(VIEWS))
def test_a_fingerprint_is_the_sum_of_the_whole_storage(name):
    t = VIEWS[name]
    assert protocol.input_fingerprints([[t, 3, t]]) == [[_by_hand(t), _by_hand(t)]]


def test_a_changed_byte_outside_the_view_changes_the_fingerprint():
    t = _BASE.clone()
    view = t[1:]
    before = protocol.input_fingerprints([[view]])
    t[0, 0] += 1  # a byte the view does not show, but its storage holds
    assert protocol.input_fingerprints([[view]]) != before


def test_a_sum_that_wraps_is_the_same_in_any_order():
    """Storages whose int64 sum overflows: addition modulo 2^64 gives one fingerprint however it is summed."""
    words = torch.tensor([2**63 - 1, 2**63 - 7, -(2**63), 5, 2**62], dtype=torch.int64)
    shuffled = words[torch.tensor([3, 0, 4, 2, 1])].clone()
    [[a]], [[b]] = protocol.input_fingerprints([[words]]), protocol.input_fingerprints([[shuffled]])
    assert a == b == _by_hand(words)
