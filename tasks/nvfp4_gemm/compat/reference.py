"""``reference`` for nvfp4_gemm submissions (GPU MODE's reference.py): the task's own ``generate_input``,
``ref_kernel`` and ``check_implementation`` (tasks/_compat_common/reference.py)."""
import importlib.util as _ilu
import sys as _sys
from pathlib import Path as _Path

_NAME = "_fp4_harness_compat_reference"
if _NAME not in _sys.modules:
    _common = _Path(__file__).resolve().parents[2] / "_compat_common" / "reference.py"
    _spec = _ilu.spec_from_file_location(_NAME, _common)
    _sys.modules[_NAME] = _ilu.module_from_spec(_spec)
    _spec.loader.exec_module(_sys.modules[_NAME])

_task = _sys.modules[_NAME].task_module(__file__)
generate_input = _task.generate_input
ref_kernel = _task.ref_kernel
check_implementation = _task.check_implementation

__all__ = ["generate_input", "ref_kernel", "check_implementation"]
