"""The ``cheat`` fixture: a cheating submission file in the test's tmp folder (tests/helpers.py)."""

from __future__ import annotations

import pytest

from tests.helpers import MXFP4_SMALL, cheat_with_correct_kernel


@pytest.fixture
def cheat(tmp_path):
    return lambda body, task=MXFP4_SMALL, name="cheat": cheat_with_correct_kernel(tmp_path, body, task, name)
