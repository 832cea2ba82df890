"""The mxfp4_mm task: its spec (task.yml), generator, reference and check (task.py). A package so that
the import-linter contracts in pyproject.toml see task.py; the harness loads task.py by path."""
