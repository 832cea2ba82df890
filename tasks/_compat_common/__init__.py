"""Shared GPU MODE compatibility modules, exposed to submissions as ``task`` and ``utils``.

Each task's ``compat/`` folder holds thin ``task.py``/``utils.py`` files that load the modules here
by file path, so they work even when the ``tasks`` package itself is not importable.
"""
