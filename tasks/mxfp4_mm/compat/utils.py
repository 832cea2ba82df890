"""``utils`` for mxfp4_mm submissions: the shared GPU MODE helpers of tasks/_compat_common/utils.py."""
import importlib.util as _ilu
import sys as _sys
from pathlib import Path as _Path

_NAME = "_fp4_harness_compat_utils"
if _NAME not in _sys.modules:
    _spec = _ilu.spec_from_file_location(_NAME, _Path(__file__).resolve().parents[2] / "_compat_common" / "utils.py")
    _sys.modules[_NAME] = _ilu.module_from_spec(_spec)
    _spec.loader.exec_module(_sys.modules[_NAME])

from _fp4_harness_compat_utils import *  # noqa: E402,F401,F403
from _fp4_harness_compat_utils import __all__  # noqa: E402,F401
