"""``reference`` for a task's submissions: GPU MODE puts the task's ``reference.py`` beside a submission,
and real submissions do ``from reference import generate_input, ref_kernel, check_implementation``.
Here those are the task's own functions, from the task's ``task.py``.

Each task's ``compat/reference.py`` is a symbolic link to this file, so the task is the one whose
``compat/`` folder the module was imported from (``__file__`` is the link's path, not resolved).
Inside the worker the task module is already loaded (it generates the inputs), and the same module is
returned: the integrity snapshot watches it, so a submission that patches ``reference``'s module
functions in place is caught; rebinding names in its own ``reference`` changes nothing of the harness's.
"""

import os as _os
import sys as _sys
from pathlib import Path as _Path

_task_py = _Path(_os.path.abspath(__file__)).parents[1] / "task.py"
try:
    from tasks.registry import load_task_module as _load
except ImportError:  # used outside the harness: the tasks package sits two levels above the task
    _sys.path.append(str(_task_py.parents[2]))
    from tasks.registry import load_task_module as _load

_task = _load(_task_py)
generate_input = _task.generate_input
ref_kernel = _task.ref_kernel
check_implementation = _task.check_implementation

__all__ = ["check_implementation", "generate_input", "ref_kernel"]
