"""``task`` for mxfp4_mm submissions (GPU MODE names): ``input_t``, ``output_t``, ``TestSpec``.

input_t is ``(A, B, B_q, B_shuffle, B_scale_sh)``; output_t is bf16 ``C [M, N]``.
"""

import importlib.util as _ilu
import sys as _sys
from pathlib import Path as _Path
from typing import TypedDict

_NAME = "_fp4_harness_compat_types"
if _NAME not in _sys.modules:
    _spec = _ilu.spec_from_file_location(_NAME, _Path(__file__).resolve().parents[2] / "_compat_common" / "types.py")
    _sys.modules[_NAME] = _ilu.module_from_spec(_spec)
    _spec.loader.exec_module(_sys.modules[_NAME])

from _fp4_harness_compat_types import input_t, output_t  # noqa: E402


class TestSpec(TypedDict):
    m: int
    n: int
    k: int
    seed: int


__all__ = ["TestSpec", "input_t", "output_t"]
