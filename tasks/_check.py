"""Output verification shared by the task specs: type, shape, dtype, device, non-finite values, tolerance."""

from __future__ import annotations

import torch

from tasks._compat_common.utils import verbose_allclose

__all__ = ["check_output", "pass_flag"]


def _same_device(a: torch.device, b: torch.device) -> bool:
    return a.type == b.type and (a.index or 0) == (b.index or 0)


def _close_all(output: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float) -> torch.Tensor:
    """A 0-d bool tensor, not read back: whether the report below would find nothing (every output value
    finite and within ``atol + rtol*|expected|``, in float64 as ``verbose_allclose`` computes it; for a
    finite output its NaN and inf allowances change nothing). One reduction, where the report's path
    takes about thirty small kernels and three reads back: the harness checks every timed output."""
    r = output.detach().to(torch.float64)
    e = expected.detach().to(torch.float64)
    close = (r - e).abs() <= atol + rtol * e.abs()
    if output.is_floating_point():
        close &= torch.isfinite(output)
    return close.all()


def _problems(output: torch.Tensor, expected: torch.Tensor) -> list[str]:
    """What makes ``output`` the wrong kind of tensor: its shape, dtype or device ([] if none)."""
    problems = []
    if tuple(output.shape) != tuple(expected.shape):
        problems.append(f"wrong shape: got {tuple(output.shape)}, expected {tuple(expected.shape)}")
    if output.dtype != expected.dtype:
        problems.append(f"wrong dtype: got {output.dtype}, expected {expected.dtype}")
    if not _same_device(output.device, expected.device):
        problems.append(
            f"wrong device: got {output.device}, expected {expected.device} (keep the output on the input's device)"
        )
    return problems


def pass_flag(output, expected: torch.Tensor, rtol: float, atol: float) -> torch.Tensor | None:
    """Whether :func:`check_output` passes ``output``, as a 0-d bool tensor on the device that is not read
    back, so that the checks of many outputs wait for the device once (``tasks.registry.Task.check_all``);
    None when it fails before comparing any value (not a tensor, or a wrong shape, dtype or device)."""
    if not isinstance(output, torch.Tensor) or _problems(output, expected):
        return None
    return _close_all(output, expected, rtol, atol)


def check_output(output, expected: torch.Tensor, rtol: float, atol: float, max_report: int = 5) -> tuple[bool, str]:
    """``(True, '')`` when ``output`` matches ``expected`` within ``atol + rtol*|expected|``.

    Otherwise ``(False, report)``: a non-tensor, wrong shape/dtype/device, NaN or inf anywhere in
    the output, or the mismatch count out of the total, the first mismatches and the max abs error.
    """
    want = f"a {expected.dtype} tensor of shape {tuple(expected.shape)} on {expected.device}"
    if not isinstance(output, torch.Tensor):
        return False, f"output is a {type(output).__name__}, not a torch.Tensor; return {want}"
    problems = _problems(output, expected)
    if problems:
        return False, "; ".join(problems) + f" (return {want})"
    if bool(_close_all(output, expected, rtol, atol)):
        return True, ""  # else the same condition again, element by element, for the report
    if output.is_floating_point():
        nan = torch.isnan(output)
        inf = torch.isinf(output)
        n_nan, n_inf = int(nan.sum()), int(inf.sum())
        if n_nan or n_inf:
            first = (nan | inf).reshape(-1).nonzero()[0, 0].item()
            idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(first), output.shape))
            return False, (
                f"output contains {n_nan} NaN and {n_inf} inf values out of {output.numel()} "
                f"(first at {idx}); NaN or inf anywhere fails"
            )
    lines = verbose_allclose(output, expected, rtol=rtol, atol=atol, max_print=max_report)
    if lines:
        return False, "output does not match the reference:\n" + "\n".join(lines)
    return True, ""
