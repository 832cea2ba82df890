"""Checking what the worker sends back: outputs rebuilt from its reply (a malformed one is a
rejection), then judged by the task's ``check_implementation``; and the shape of a timing reply."""
from __future__ import annotations

import math

import torch

from harness import protocol
from harness.engine.context import RunContext
from harness.engine.supervisor import WorkerFailure
from harness.protocol import ProtocolError, accepts_dtype, rebuild_tensor
from harness.results import REJECTED


class Unusable:
    """An output the harness cannot check as a tensor; ``what`` describes it."""

    def __init__(self, what: str):
        self.what = what


class Checker:
    def __init__(self, ctx: RunContext):
        self.ctx = ctx

    def outputs(self, header: dict, payloads: list) -> list:
        """The outputs a reply carries, rebuilt here; an output that is not a usable tensor becomes an
        :class:`Unusable` (a wrong output), a malformed reply a rejection (only tampering produces one)."""
        metas = header.get("outputs", [])
        if not isinstance(metas, list) or not all(isinstance(m, dict) for m in metas) or \
                sum(m.get("kind") == "tensor" for m in metas) != len(payloads):
            raise WorkerFailure(REJECTED, "a reply whose outputs do not match the data it carries: the "
                                          "submission wrote into the harness's channel")
        outs, it = [], iter(payloads)
        with self.ctx.phases.measure("receive"):
            for meta in metas:
                if meta.get("kind") != "tensor":
                    outs.append(Unusable(f"a {meta.get('type', '?')}, not a torch.Tensor"))
                    continue
                raw = next(it)
                if not accepts_dtype(meta.get("dtype")):
                    outs.append(Unusable(f"a torch.Tensor of dtype {meta.get('dtype')}, which is no task's "
                                         "output dtype"))
                    continue
                try:
                    outs.append(rebuild_tensor(meta, raw, self.ctx.device))
                except ProtocolError as exc:
                    raise WorkerFailure(REJECTED, f"a malformed output in the worker's reply ({exc}): the "
                                                  "submission wrote into the harness's channel") from exc
        return outs

    def check(self, data, out) -> tuple[bool, str]:
        if isinstance(out, Unusable):
            return False, f"custom_kernel returned {out.what}"
        with self.ctx.phases.measure("check"):
            return self.ctx.task.check(data, out)

    def check_fixed(self, data, out, passed: list) -> tuple[bool, str]:
        """Benchmark mode re-checks the same fixed input every chunk: an output bit-identical to one
        that already passed on that input passes without recomputing the reference."""
        if passed and isinstance(out, torch.Tensor) and out.dtype == passed[0].dtype \
                and out.shape == passed[0].shape and torch.equal(out, passed[0]):
            return True, ""
        ok, message = self.check(data, out)
        if ok and isinstance(out, torch.Tensor):
            passed[:] = [out]
        return ok, message


def check_timing_reply(header: dict, n_samples: int, n_outputs: int) -> None:
    """A timing reply carries exactly the samples and outputs asked for; anything else is a forgery
    (an honest worker cannot produce it), and fewer outputs would leave timed calls unchecked."""
    lists = samples, walls, windows, held, unhidden = [header.get(k) for k in protocol.TIMING_SERIES]
    numbers = samples + walls if all(isinstance(x, list) for x in lists) else None
    if numbers is None or any(len(x) != n_samples for x in lists) or \
            not all(isinstance(x, (int, float)) and math.isfinite(x) and x >= 0 for x in numbers) or \
            not all(w is None or isinstance(w, (int, float)) and math.isfinite(w) for w in windows + unhidden) or \
            not all(isinstance(h, bool) for h in held) or \
            len(header.get("outputs") or []) != n_outputs:
        raise WorkerFailure(REJECTED, "a timing reply that does not match its request (samples or outputs "
                                      "missing or malformed): the submission wrote into the harness's channel")
