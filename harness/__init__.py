"""GPU-kernel competition harness: load, check, time, rank, store, report."""

__version__ = "0.1.0"
