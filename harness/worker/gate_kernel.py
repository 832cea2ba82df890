"""The launch gate's kernel (see ``harness.worker.gate``): fills every thread slot of every SM and spins until
the host releases it or the cap passes; and the sampler's timestamp kernels, which read the same device
clock. Imported only on a GPU, when a gate is built."""

import triton
import triton.language as tl


@triton.jit
def _now():
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _signal_host(ptr, value):
    """A system-scope release store to pinned host memory (no PCIe atomics needed)."""
    tl.inline_asm_elementwise(
        "st.global.release.sys.b32 [$1], $2; mov.u32 $0, 0;",
        "=r,l,r",
        [ptr, value],
        dtype=tl.int32,
        is_pure=False,
        pack=1,
    )


@triton.jit
def _wait(flag_ptr, seq, t0, cap_ns):
    waiting = tl.load(flag_ptr, volatile=True) != seq
    while waiting:
        waiting = (tl.load(flag_ptr, volatile=True) != seq) & (_now() - t0 <= cap_ns)


@triton.jit(do_not_specialize=["seq", "nblocks", "cap_ns"])
def gate_kernel(count_ptr, open_ptr, started_ptr, release_ptr, seq, nblocks, cap_ns):
    # count_ptr, open_ptr: device memory; started_ptr, release_ptr: pinned host memory, which the
    # host polls / writes while this kernel runs. Only block 0 polls the host (over PCIe); the
    # others poll open_ptr, which block 0 sets once released.
    t0 = _now()
    old = tl.atomic_add(count_ptr, 1, sem="acq_rel", scope="gpu")
    if old == nblocks - 1:  # the last block to arrive: every block is resident
        tl.atomic_xchg(count_ptr, 0, sem="relaxed", scope="gpu")
        _signal_host(started_ptr, seq)
    if tl.program_id(0) == 0:
        _wait(release_ptr, seq, t0, cap_ns)
        tl.atomic_xchg(open_ptr, seq, sem="release", scope="gpu")
    else:
        _wait(open_ptr, seq, t0, cap_ns)


@triton.jit(do_not_specialize=["slot"])
def stamp_kernel(ptr, slot):
    """Writes the device's global timer (ns) to ``ptr[slot]``: the sampler's own clock, beside the events."""
    tl.store(ptr + slot, _now())


@triton.jit(do_not_specialize=["slot"])
def occupancy_stamp_kernel(ptr, slot):
    """Launched on the gate's grid (every thread slot of every SM): each block keeps in ``ptr[slot]`` the
    latest time a block started, so the value is when the last SM had room for it: on an idle device at
    once, else when the blocks another stream had running there ended (not the kernels queued behind them:
    its blocks take the first free slots). Times only grow, so no reset is needed."""
    tl.atomic_max(ptr + slot, _now(), sem="relaxed", scope="gpu")
