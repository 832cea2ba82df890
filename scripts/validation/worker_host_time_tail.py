# Appended to a copy of submissions/triton_nvfp4.py, not run on its own: the host time of each call as the
# harness's worker makes it (launch gate, fresh inputs, the sandbox), beside the same parts timed in a
# tight loop in that process (scripts/validation/host_time.py times them in a plain process).
#
#     cat submissions/triton_nvfp4.py scripts/validation/worker_host_time_tail.py > DIR/triton_nvfp4_diag.py
#     python -m harness run DIR/triton_nvfp4_diag.py --task nvfp4_gemm --mode leaderboard [--no-drop-privileges] \
#         --json results/probes/h200_worker_host_time_nvfp4_<commit>.json
#
# The lines starting "DIAG" in that result's "stderr": per benchmark shape (n, k), once its launch plan
# exists, the parts (custom_kernel, the plan, each cuLaunchKernelEx, a ctypes no-op; us per call over 200
# calls back to back), the uid and the CPUs it may use; then every 1000 calls the mean, median and 90th
# percentile of the host time of a call (perf_counter_ns around it). Its score is not the file's: the
# wrapper and the loops cost time of their own.
import sys
import time as _time

_orig_kernel = custom_kernel  # noqa: F821 - defined by the file this is appended to
_seen = {}


def _per_call_us(fn, calls=200):
    fn()
    torch.cuda.synchronize()  # noqa: F821
    t0 = _time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = _time.perf_counter()
    torch.cuda.synchronize()  # noqa: F821
    return (t1 - t0) / calls * 1e6


def _parts(data, plan):
    a, b, sfa, sfb, _, _, c = data
    ptrs = (a.data_ptr(), b.data_ptr(), sfa.data_ptr(), sfb.data_ptr(), c.data_ptr())
    lib = _libcuda()  # noqa: F821
    out = {"custom_kernel": _per_call_us(lambda: _orig_kernel(data)), "plan": _per_call_us(lambda: plan(ptrs))}
    stream = torch.cuda.current_stream().cuda_stream  # noqa: F821
    for n, (cfg, function, params, _, _, _) in enumerate(plan.direct or ()):
        cfg.stream = stream
        ca, pa = ctypes.addressof(cfg), ctypes.addressof(params)  # noqa: F821
        out[f"cuLaunchKernelEx_{n}"] = _per_call_us(lambda: lib.cuLaunchKernelEx(ca, function, pa, None))
    v = ctypes.c_int()  # noqa: F821
    out["ctypes_noop"] = _per_call_us(lambda: lib.cuDriverGetVersion(ctypes.byref(v)))  # noqa: F821
    out["uid"] = os.getuid()  # noqa: F821
    out["affinity"] = len(os.sched_getaffinity(0))  # noqa: F821
    return out


def custom_kernel(data):
    n, k = data[1].shape[0], data[0].shape[1] * 2
    seen = _seen.setdefault((n, k), [])
    a, b, sfa, sfb, _, _, c = data
    ptrs = (a.data_ptr(), b.data_ptr(), sfa.data_ptr(), sfb.data_ptr(), c.data_ptr())
    key = (
        a.shape,
        b.shape,
        a.stride(),
        b.stride(),
        sfa.stride(),
        sfb.stride(),
        c.stride(),
        a.get_device(),
        (ptrs[1] | ptrs[3]) % 16 == 0,
    )
    plan = _PLANS.get(key)  # noqa: F821
    if len(seen) == 1 and plan is not None:
        try:
            print(
                f"DIAG parts n={n} k={k}: " + ", ".join(f"{x} {y:.2f}" for x, y in _parts(data, plan).items()),
                file=sys.stderr,
                flush=True,
            )
        except Exception as e:
            print(f"DIAG parts failed {e!r}", file=sys.stderr, flush=True)
    t0 = _time.perf_counter_ns()
    out = _orig_kernel(data)
    seen.append(_time.perf_counter_ns() - t0)
    if len(seen) % 1000 == 0:
        last = sorted(seen[-1000:])
        print(
            f"DIAG calls n={n} k={k} #{len(seen)}: mean {sum(last) / 1e6:.2f} us, median {last[500] / 1e3:.2f}, "
            f"p90 {last[900] / 1e3:.2f}",
            file=sys.stderr,
            flush=True,
        )
    return out
