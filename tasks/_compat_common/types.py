"""Type names that GPU MODE submissions import with ``from task import input_t, output_t``."""

from __future__ import annotations

from typing import TypeVar

import torch

__all__ = ["input_t", "output_t"]

input_t = TypeVar("input_t", bound=tuple[torch.Tensor, ...])
output_t = TypeVar("output_t", bound=torch.Tensor)
