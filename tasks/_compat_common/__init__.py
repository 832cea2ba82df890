"""Shared GPU MODE compatibility modules, exposed to submissions as ``task``, ``utils`` and ``reference``.

Each task's ``compat/`` folder holds a thin ``task.py`` that loads ``types.py`` here by file path (so
it works even when the ``tasks`` package itself is not importable, and the name ``types`` never shadows
the standard library's), and ``utils.py`` and ``reference.py``, symbolic links to the files of those
names here.
"""
