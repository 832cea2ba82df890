"""What a task's ``compat/reference.py`` exposes: GPU MODE puts the task's ``reference.py`` beside a
submission, and real submissions do ``from reference import generate_input, ref_kernel,
check_implementation``. Here those are the task's own functions, from the task's ``task.py``.

Inside the worker the task module is already loaded (it generates the inputs), and the same module is
returned: the integrity snapshot watches it, so a submission that patches ``reference``'s module
functions in place is caught; rebinding names in its own ``reference`` changes nothing of the harness's.
"""
from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType



def task_module(compat_file: str) -> ModuleType:
    """The task.py of the task whose ``compat/`` folder holds ``compat_file``."""
    task_py = Path(compat_file).resolve().parents[1] / "task.py"
    try:
        from tasks.registry import load_task_module
    except ImportError:     # used outside the harness: the tasks package sits two levels above the task
        sys.path.append(str(task_py.parents[2]))
        from tasks.registry import load_task_module
    return load_task_module(task_py)
