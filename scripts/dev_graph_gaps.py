"""Dev probe (issue #7): where does kernel-only (CUDA graph, events) differ from CUPTI's kernel sum?

For a few calls (a globaltimer spin kernel of known length, examples, cuBLAS): events on a graph of
n x (flush, call) minus n flushes, replayed plainly and behind the launch gate; CUPTI's per-kernel
durations, gaps and window in a replay of the same graphs; and event nodes recorded inside the graph
around each call. Writes JSON to --out.   python scripts/dev_graph_gaps.py --out /tmp/gaps.json

Seen on the H200 (2026-11-29): behind the gate the events agree with CUPTI's window; without it, the
host's time to launch a graph of hundreds of nodes is in the figure; event nodes inside the graph
add a few microseconds per call (no use for timing). results/h200_graph_gaps.json is a run of the
built-in list: every kernel, the timer-spin one included, sits about 0.23-0.4 us longer in the graph
window than in CUPTI's kernel sum. ``--only FILE:TASK:IDX ...`` studies other submission files.
"""
import argparse
import datetime
import importlib.util
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from harness import timing  # noqa: E402
from harness.device import device_info  # noqa: E402
from tasks import load_task  # noqa: E402


@triton.jit(do_not_specialize=["ns"])
def _spin(x, ns):
    t0 = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)
    t = t0
    while t - t0 < ns:
        t = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


def load(path):
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.custom_kernel


GATE = None


def events_time(g, reps=7, gate=False):
    """Median device time of ``reps`` replays (after one more), with the harness's own primitive."""
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(reps + 1):
        ns, gated = timing._replay_ns(g, s, e, GATE if gate else None)
        assert gated or not gate, "the launch gate did not close"
        out.append(ns)
    return statistics.median(out[1:])


def capture(body):
    g = torch.cuda.CUDAGraph()
    st = torch.cuda.Stream()
    st.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(st):
        body()
    torch.cuda.current_stream().wait_stream(st)
    torch.cuda.synchronize()
    with torch.cuda.graph(g, stream=st):
        body()
    return g


def cupti(g):
    g.replay()
    torch.cuda.synchronize()
    return timing._profiled_replay(g)


def study(name, fn_call, flush, n=20):
    g_f = capture(lambda: [flush() for _ in range(n)])

    def pairs():
        for _ in range(n):
            flush()
            fn_call()
    g_p = capture(pairs)
    tf, tp = events_time(g_f), events_time(g_p)
    tfg, tpg = events_time(g_f, gate=True), events_time(g_p, gate=True)
    ev_f, ev_p = cupti(g_f), cupti(g_p)
    per_f = (ev_f[-1][0] - ev_f[0][0]) / (n - 1)
    per_p = (ev_p[-1 - (len(ev_p) // n - 1)][0] - ev_p[0][0]) / (n - 1)
    per_flush = len(ev_f) // n
    per_block = len(ev_p) // n
    k = per_block - per_flush
    sums, spans = [], []
    gaps = []
    for i in range(n):
        blk = ev_p[i * per_block:(i + 1) * per_block]
        call = blk[per_flush:]
        sums.append(sum(b - a for a, b, _ in call))
        spans.append(call[-1][1] - call[0][0])
        for j in range(per_flush - 1, per_block - 1):
            gaps.append(blk[j + 1][0] - blk[j][1])
    names = [nm[:70] for _, _, nm in ev_p[:per_block]]
    flush_gaps = [ev_f[i + 1][0] - ev_f[i][1] for i in range(len(ev_f) - 1)]
    r = {"name": name, "n": n, "events_pairs_ns": tp, "events_flush_ns": tf,
         "kernel_only_ns": (tp - tf) / n, "gated_kernel_only_ns": (tpg - tfg) / n,
         "cupti_period_diff_ns": (per_p - per_f) * 1e3, "cupti_total_pairs_ns": (ev_p[-1][1] - ev_p[0][0]) * 1e3,
         "gated_pairs_ns": tpg, "gated_flush_ns": tfg, "kernels_per_call": k, "flush_kernels": per_flush,
         "cupti_sum_ns": statistics.mean(sums) * 1e3, "cupti_span_ns": statistics.mean(spans) * 1e3,
         "cupti_gap_mean_ns": statistics.mean(gaps) * 1e3 if gaps else None,
         "cupti_gap_median_ns": statistics.median(gaps) * 1e3 if gaps else None,
         "cupti_gaps_first_block_ns": [g * 1e3 for g in gaps[:per_block]],
         "cupti_flush_gap_median_ns": statistics.median(flush_gaps) * 1e3 if flush_gaps else None,
         "cupti_flush_ns": statistics.mean(b - a for a, b, _ in ev_f) * 1e3,
         "names": names, "durations_first_block_ns": [(b - a) * 1e3 for a, b, _ in ev_p[:per_block]]}
    try:
        r["inner_ns"] = inner_events(fn_call, flush, n)
        r["inner_dev_pct"] = 100 * (r["inner_ns"] - r["cupti_sum_ns"]) / r["cupti_sum_ns"]
    except Exception as exc:  # noqa: BLE001
        r["inner_ns"] = repr(exc)[:200]
    r["gated_dev_pct"] = 100 * (r["gated_kernel_only_ns"] - r["cupti_sum_ns"]) / r["cupti_sum_ns"]
    r["dev_pct"] = 100 * (r["kernel_only_ns"] - r["cupti_sum_ns"]) / r["cupti_sum_ns"]
    r["excess_per_kernel_ns"] = (r["kernel_only_ns"] - r["cupti_sum_ns"]) / max(k, 1)
    print(json.dumps({k2: v for k2, v in r.items() if k2 in ("name", "inner_ns", "inner_dev_pct", "gated_kernel_only_ns",
          "cupti_period_diff_ns", "cupti_sum_ns", "cupti_span_ns", "dev_pct", "gated_dev_pct", "kernels_per_call")}),
          flush=True)
    return r


def inner_events(fn_call, flush, n=20):
    """Per call: elapsed between event nodes recorded right before and right after the call, inside a
    graph of n x (flush, call)."""
    evs = [(torch.cuda.Event(enable_timing=True, external=True), torch.cuda.Event(enable_timing=True, external=True))
           for _ in range(n)]

    def body():
        for s_, e_ in evs:
            flush()
            s_.record()
            fn_call()
            e_.record()
    g = capture(body)
    res = []
    for rep in range(4):
        if GATE.close(cap_ns=50_000_000):
            g.replay()
            GATE.open()
        torch.cuda.synchronize()
        if rep:
            res.append(statistics.median(s_.elapsed_time(e_) * 1e6 for s_, e_ in evs))
    return statistics.median(res)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--only", nargs="*", metavar="FILE:TASK:IDX",
                   help="study only these submission files on these benchmark indices (e.g. "
                        "submissions/torch_mxfp4.py:mxfp4_mm:0); default: the built-in list, the spin "
                        "kernel and cuBLAS")
    args = p.parse_args()
    dev = torch.device("cuda")
    flush = timing.L2Flusher(dev, device_info(dev).l2_bytes)
    out = {"device": torch.cuda.get_device_name(), "driver": device_info(dev).driver,
           "torch": torch.__version__, "triton": triton.__version__,
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "argv": sys.argv[1:], "rows": []}
    global GATE
    from harness.gate import LaunchGate
    GATE, why = LaunchGate.create(dev, 50e6)
    assert GATE, why
    x = torch.zeros(16, device=dev)
    mx, nv = load_task("mxfp4_mm"), load_task("nvfp4_gemm")
    todo = [(ROOT / "submissions" / f"{sub}.py", task, idx) for sub, task, idx in (
        ("torch_mxfp4", mx, [0]), ("triton_mxfp4", mx, [0, 2]), ("gluon", mx, [0, 3]), ("triton_nvfp4", nv, [2]))]
    if args.only:
        todo = [(Path(f), load_task(t), [int(i)]) for f, t, i in (o.split(":") for o in args.only)]
    else:
        out["rows"].append(study("spin 8000 x1", lambda: _spin[(1,)](x, 8000), flush))
    for path, task, idx in todo:
        fn, sub = load(path), Path(path).stem
        for i in idx:
            case = task.benchmarks[i]
            data = task.generate_input(case, dev)
            try:
                fn(data)
                out["rows"].append(study(f"{sub} {case}", lambda fn=fn, data=data: fn(data), flush))
            except Exception as exc:  # noqa: BLE001
                out["rows"].append({"name": f"{sub} {case}", "error": repr(exc)[:300]})
            Path(args.out).write_text(json.dumps(out, indent=1))
    for i in () if args.only else (0, 2):
        data = mx.generate_input(mx.benchmarks[i], dev)
        out["rows"].append(study(f"cublas {mx.benchmarks[i]}", lambda data=data: data[0] @ data[1].T, flush))
    Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
