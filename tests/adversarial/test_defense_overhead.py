"""bench/defense_overhead.py in its CPU --quick form, and the --no-defenses stamp."""

from __future__ import annotations

import importlib.util
import json

from tests.helpers import ROOT


def test_defense_overhead_quick_writes_both_score_lists(tmp_path):
    spec = importlib.util.spec_from_file_location("defense_overhead", ROOT / "bench" / "defense_overhead.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "o.json"
    assert mod.main(["--quick", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert len(doc["scores_us"]["on"]) == len(doc["scores_us"]["off"]) == 1
    assert doc["verdicts"] == {"on": ["pass"], "off": ["pass"]}
    assert doc["ratio_on_over_off"] > 0 and doc["device"]["kind"] == "cpu"
