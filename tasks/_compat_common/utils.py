"""GPU MODE-style helpers (``from utils import ...`` in competition files). Depends only on torch."""

from __future__ import annotations

import random

import torch

__all__ = [
    "DeterministicContext",
    "clear_l2_cache",
    "get_device",
    "make_match_reference",
    "match_reference",
    "set_seed",
    "verbose_allclose",
    "verbose_allequal",
]


def set_seed(seed: int = 42) -> None:
    """Seed Python's, torch's CPU and every GPU's global RNG."""
    random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def get_device(use_cuda: bool = True) -> torch.device:
    """``cuda`` (also ROCm) when available and wanted, else ``cpu``."""
    return torch.device("cuda" if use_cuda and torch.cuda.is_available() else "cpu")


def _index(flat_idx: int, shape) -> tuple[int, ...]:
    idx = []
    for dim in reversed(tuple(shape)):
        idx.append(flat_idx % dim)
        flat_idx //= dim
    return tuple(reversed(idx))


def _describe(
    received: torch.Tensor, expected: torch.Tensor, bad: torch.Tensor, max_print: int, what: str
) -> list[str]:
    n_bad = int(bad.sum())
    if n_bad == 0:
        return []
    lines = [f"Number of mismatched elements: {n_bad} of {bad.numel()} ({what})"]
    first = bad.reshape(-1).nonzero()[:max_print, 0].tolist()
    r_flat, e_flat = received.reshape(-1), expected.reshape(-1)
    for i in first:
        lines.append(f"ERROR at {_index(i, bad.shape)}: got {r_flat[i].item()!r}, expected {e_flat[i].item()!r}")
    if n_bad > len(first):
        lines.append(f"... and {n_bad - len(first)} more mismatched elements.")
    return lines


def verbose_allclose(
    received: torch.Tensor, expected: torch.Tensor, rtol: float = 1e-5, atol: float = 1e-8, max_print: int = 5
) -> list[str]:
    """Elementwise ``|received - expected| <= atol + rtol * |expected|``; [] when all match.

    NaN matches only NaN and inf only the same inf. On a mismatch the list holds the count out of
    the total, the first ``max_print`` mismatches (index, got, expected) and the max abs error.
    """
    if received.shape != expected.shape:
        return [f"SIZE MISMATCH: got shape {tuple(received.shape)}, expected {tuple(expected.shape)}"]
    r = received.detach().to(device=expected.device, dtype=torch.float64)
    e = expected.detach().to(torch.float64)
    diff = (r - e).abs()
    close = diff <= atol + rtol * e.abs()
    close |= torch.isnan(r) & torch.isnan(e)
    close |= torch.isinf(r) & torch.isinf(e) & (r == e)
    bad = ~close
    lines = _describe(r, e, bad, max_print, f"atol={atol:g}, rtol={rtol:g}")
    if lines:
        finite = diff[torch.isfinite(diff)]
        worst = float(finite.max()) if finite.numel() else float("nan")
        lines.append(f"Max abs error: {worst:.6g}")
    return lines


def verbose_allequal(received: torch.Tensor, expected: torch.Tensor, max_print: int = 5) -> list[str]:
    """Exact equality (NaN equals NaN); [] when equal, else the count and first mismatches."""
    if received.shape != expected.shape:
        return [f"SIZE MISMATCH: got shape {tuple(received.shape)}, expected {tuple(expected.shape)}"]
    r = received.detach().to(expected.device)
    e = expected.detach()
    same = r == e
    if r.is_floating_point() or e.is_floating_point():
        same |= torch.isnan(r.to(torch.float64)) & torch.isnan(e.to(torch.float64))
    return _describe(r, e, ~same, max_print, "exact")


def match_reference(data, output, reference, rtol: float = 1e-5, atol: float = 1e-8) -> tuple[bool, str]:
    """Compare ``output`` with ``reference(data)``; ``(True, '')`` or ``(False, report)``."""
    expected = reference(data)
    reasons = verbose_allclose(output, expected, rtol=rtol, atol=atol)
    if reasons:
        return False, "mismatch found! custom implementation doesn't match reference:\n" + "\n".join(reasons)
    return True, ""


def make_match_reference(reference, **kwargs):
    """A ``check_implementation(data, output)`` built on :func:`match_reference`."""

    def check_implementation(data, output):
        return match_reference(data, output, reference=reference, **kwargs)

    return check_implementation


class DeterministicContext:
    """Deterministic torch algorithms and cuDNN inside the block; the previous settings after."""

    def __enter__(self):
        self._cudnn = torch.backends.cudnn.deterministic
        self._bench = torch.backends.cudnn.benchmark
        self._algos = torch.are_deterministic_algorithms_enabled()
        self._warn = torch.is_deterministic_algorithms_warn_only_enabled()
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
        torch.use_deterministic_algorithms(True, warn_only=True)
        return self

    def __exit__(self, *exc):
        torch.backends.cudnn.deterministic = self._cudnn
        torch.backends.cudnn.benchmark = self._bench
        torch.use_deterministic_algorithms(self._algos, warn_only=self._warn)
        return False


_L2_FLUSH = {}


def clear_l2_cache(device=None) -> None:
    """Evict the GPU's L2 by writing a buffer twice its size (sized from the device); no-op on CPU."""
    if not torch.cuda.is_available():
        return
    dev = torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)
    if dev.type != "cuda":
        return
    buf = _L2_FLUSH.get(dev)
    if buf is None:
        l2 = getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 0) or 256 * 1024 * 1024
        buf = _L2_FLUSH[dev] = torch.empty(2 * l2, dtype=torch.uint8, device=dev)
    buf.add_(1)
