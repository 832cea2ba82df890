"""Task specs (``tasks/<name>/task.yml`` + ``task.py``), built only on ``reference``."""

from tasks.registry import Task, TaskSpecError, list_tasks, load_task

__all__ = ["Task", "TaskSpecError", "list_tasks", "load_task"]
