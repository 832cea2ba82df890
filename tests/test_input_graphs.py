"""Input generation replayed from a CUDA graph (harness.input_graphs): outputs copied out with every byte,
size, stride and offset; a shape's first inputs checked against eager generation; a graph that differs
or fails turned off for its shape, with the eager inputs answering. The guard is tested on the CPU with
stand-in graphs; the real graphs on a GPU, against eager generation, on every benchmark shape."""

from __future__ import annotations

import time

import pytest
import torch

from harness.input_graphs import (
    CAPTURE_AFTER,
    CHECKED_INPUTS,
    GraphedInputs,
    copy_out,
    same_inputs,
    storage_bytes,
    takes_generator,
)
from harness.protocol import input_fingerprints, storage_sums
from tasks import load_task

NVFP4_CASE = {"m": 128, "n": 256, "k": 512, "l": 1}


def _nvfp4(seed: int = 7) -> tuple:
    return tuple(load_task("nvfp4_gemm").module.generate_input(**NVFP4_CASE, seed=seed, device="cpu"))


def test_copies_keep_bytes_layout_and_shared_storages_on_fresh_memory():
    base = torch.arange(64, dtype=torch.int32)
    view = base[8:40].view(4, 8).t()  # an offset, transposed view
    other = base.view(8, 8)  # the same storage
    original = (view, other, 3, _nvfp4()[0])
    copied = copy_out(original)
    assert same_inputs(original, copied)
    assert copied[0].storage_offset() == 8 and copied[0].stride() == (1, 8)
    assert copied[0].untyped_storage().data_ptr() != base.untyped_storage().data_ptr()
    assert copied[0].untyped_storage().data_ptr() == copied[1].untyped_storage().data_ptr()
    base.zero_()  # the copies do not follow the original
    assert not same_inputs(original, copied)


def test_a_different_byte_layout_or_value_is_not_the_same_input():
    a = _nvfp4()
    changed = copy_out(a)
    storage_bytes(changed[6])[-1] ^= 1  # c's last byte
    assert not same_inputs(a, changed)
    x = torch.arange(12).view(3, 4)
    assert not same_inputs((x,), (x.t().contiguous().t(),))  # the same values, other strides
    assert not same_inputs((1, a[0]), (2, a[0])) and not same_inputs(a, a[:-1])
    assert same_inputs(a, _nvfp4()) and not same_inputs(a, _nvfp4(seed=8))


class _StandIn:
    """A stand-in for a captured graph on the CPU: ``replay`` draws as the task does, from its own
    generator; ``stuck`` keeps the first seed it replayed (a replay that ignores a new seed)."""

    captures = 0

    def __init__(self, generate, case, device, stuck=False):
        type(self).captures += 1
        self.generate, self.case, self.device, self.stuck, self.seed, self.replays = (
            generate,
            case,
            device,
            stuck,
            None,
            0,
        )

    def replay(self, seed):
        self.replays += 1
        if self.seed is None or not self.stuck:
            self.seed = seed
        gen = torch.Generator(device=self.device).manual_seed(self.seed)
        data = tuple(self.generate(**self.case, device=self.device, generator=gen))
        return data, storage_sums(data)


def _graphed(
    capture, capture_after: int = 1, faster: float = float("inf")
) -> tuple[GraphedInputs, list[str], list[int]]:
    """GraphedInputs on the CPU with ``capture`` in place of CUDA graphs, counting eager generations."""
    generate = load_task("nvfp4_gemm").module.generate_input
    eager_calls: list[int] = []

    def counted(**kw):
        if kw.get("generator") is None:
            eager_calls.append(kw["seed"])
        return generate(**kw)

    warned: list[str] = []
    g = GraphedInputs(
        counted, torch.device("cpu"), warn=warned.append, capture=capture, capture_after=capture_after, faster=faster
    )
    g.usable = True  # graphs need CUDA: the stand-in plays them here
    return g, warned, eager_calls


def test_a_trusted_graph_answers_after_its_first_inputs_matched_eager_ones():
    _StandIn.captures = 0
    g, warned, eager_calls = _graphed(_StandIn)
    seeds = [11, 12, 13, 14, 15]
    got = [g.generate(dict(NVFP4_CASE, seed=s)) for s in seeds]
    assert all(same_inputs(x, _nvfp4(s)) for x, s in zip(got, seeds))
    assert _StandIn.captures == 1 and not warned and not g.off
    assert eager_calls == seeds[:CHECKED_INPUTS]  # then replays alone
    g.generate(dict(NVFP4_CASE, m=256, seed=1))  # a new shape is captured and checked on its own
    assert _StandIn.captures == 2 and eager_calls[-1] == 1


def test_a_shape_is_captured_only_once_it_had_enough_inputs_to_pay_for_it():
    _StandIn.captures = 0
    g, _, eager_calls = _graphed(_StandIn, capture_after=CAPTURE_AFTER)
    for s in range(CAPTURE_AFTER - 1):
        g.generate(dict(NVFP4_CASE, seed=s))
    assert _StandIn.captures == 0 and len(eager_calls) == CAPTURE_AFTER - 1
    for s in range(CAPTURE_AFTER - 1, CAPTURE_AFTER + 5):
        assert same_inputs(g.generate(dict(NVFP4_CASE, seed=s)), _nvfp4(s))
    # captured at the CAPTURE_AFTER-th input, which with the next one was checked: then replays alone
    assert _StandIn.captures == 1 and len(eager_calls) == CAPTURE_AFTER - 1 + CHECKED_INPUTS


def test_fingerprints_come_with_the_inputs_and_a_graph_whose_fingerprint_differs_is_turned_off():
    g, warned, _ = _graphed(_StandIn)
    cases = [dict(NVFP4_CASE, seed=s) for s in range(6)]
    made, fingerprints = g.generate_fingerprinted(cases)
    assert fingerprints == input_fingerprints(made) == input_fingerprints([_nvfp4(s) for s in range(6)])
    assert not warned and g.graphs  # the last ones were replays

    class WrongSum(_StandIn):
        def replay(self, seed):
            data, sums = super().replay(seed)
            return data, sums + 1

    g, warned, _ = _graphed(WrongSum)
    made, fingerprints = g.generate_fingerprinted(cases)
    assert fingerprints == input_fingerprints([_nvfp4(s) for s in range(6)])
    assert len(warned) == 1 and not g.graphs


def test_a_graph_no_faster_than_eager_generation_is_dropped_without_a_warning():
    class Slow(_StandIn):  # draws op by op itself, and then some
        def replay(self, seed):
            time.sleep(0.005)
            return super().replay(seed)

    Slow.captures = 0
    g, warned, eager_calls = _graphed(Slow, faster=0.8)
    got = [g.generate(dict(NVFP4_CASE, seed=s)) for s in range(5)]
    assert all(same_inputs(x, _nvfp4(s)) for s, x in enumerate(got)) and eager_calls == list(range(5))
    assert Slow.captures == 1 and not g.graphs and not warned


def test_a_graph_that_keeps_its_first_seed_is_turned_off_at_its_second_input():
    g, warned, eager_calls = _graphed(lambda *a: _StandIn(*a, stuck=True))
    seeds = [21, 22, 23, 24]
    got = [g.generate(dict(NVFP4_CASE, seed=s)) for s in seeds]
    assert all(same_inputs(x, _nvfp4(s)) for x, s in zip(got, seeds))  # the eager inputs answered
    assert eager_calls == seeds and len(g.off) == 1 and not g.graphs
    assert len(warned) == 1 and "other bytes than eager generation" in warned[0] and "'m': 128" in warned[0]


def test_a_capture_that_fails_leaves_eager_generation_with_a_warning():
    def broken(*args):
        raise RuntimeError("operation not permitted when stream is capturing")

    g, warned, eager_calls = _graphed(broken)
    x = g.generate(dict(NVFP4_CASE, seed=5))
    y = g.generate(dict(NVFP4_CASE, seed=6))
    assert same_inputs(x, _nvfp4(5)) and same_inputs(y, _nvfp4(6)) and eager_calls == [5, 6]
    assert len(warned) == 1 and "RuntimeError: operation not permitted" in warned[0]


def test_a_trusted_graph_whose_replay_fails_later_leaves_eager_generation():
    class FailsLater(_StandIn):
        def replay(self, seed):
            if self.replays >= CHECKED_INPUTS:
                raise RuntimeError("CUDA error: an illegal memory access was encountered")
            return super().replay(seed)

    g, warned, eager_calls = _graphed(FailsLater)
    got = [g.generate(dict(NVFP4_CASE, seed=s)) for s in range(5)]
    assert all(same_inputs(x, _nvfp4(s)) for s, x in enumerate(got)) and eager_calls == list(range(5))
    assert len(warned) == 1 and "a replay failed (RuntimeError: CUDA error" in warned[0] and not g.graphs


def test_graphs_only_on_a_cuda_device_and_for_a_generator_that_takes_one():
    def old_style(m, n, k, seed, device=None):
        return ()

    assert takes_generator(load_task("mxfp4_mm").module.generate_input)
    assert not takes_generator(old_style)
    assert not GraphedInputs(old_style, torch.device("cuda")).usable
    assert not GraphedInputs(load_task("nvfp4_gemm").module.generate_input, torch.device("cpu")).usable


@pytest.mark.gpu
@pytest.mark.parametrize("task_name", ["mxfp4_mm", "nvfp4_gemm"])
def test_on_a_gpu_replayed_inputs_are_the_eager_ones_on_every_benchmark_shape(task_name):
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    task = load_task(task_name)
    warned: list[str] = []
    g = GraphedInputs(
        task.module.generate_input, torch.device("cuda"), warn=warned.append, capture_after=1, faster=float("inf")
    )
    for case in task.benchmarks:
        specs = [dict(case, seed=seed) for seed in [case["seed"], 3, 1 << 40, 987654321, 5, 6]]
        made, fingerprints = g.generate_fingerprinted(specs)
        eager = [tuple(task.module.generate_input(**spec, device="cuda")) for spec in specs]
        assert all(same_inputs(x, y) for x, y in zip(made, eager)), case
        assert fingerprints == input_fingerprints(eager), case
        torch.cuda.empty_cache()
    assert not warned and not g.off  # every shape's graph was trusted and answered its last four inputs
    assert len(g.graphs) == len(task.benchmarks)
