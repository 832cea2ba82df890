#!/usr/bin/env python
"""Lab model: what does a file gain by having its slow blocks measured again on purpose?

A block that only the escaped-work check rejected is dropped and measured again, up to
``harness.engine.blocks.max_remeasured(B)`` blocks a run. A file can trip that check at will (work on a
side stream), and it can time itself, so it can ask for a new draw of any block it finds slow. Block
scores are modelled as independent normal draws (in units of the between-block sd); the file redraws a
block (the new draw too) while it is above a threshold and redraws are left. For each limit the script
prints the best threshold's gain on the mean of the B block scores, in between-block sds, and what the
limit costs an honest file on a host that flags each block measured with probability ``--flag-rate``,
independently: the chance that more blocks than the limit are flagged before B pass, rejecting the run.

  python bench/lab/redraw_gain.py                # 10 blocks (a ranked GPU run, or a 10-round final's
      # entry); 1 block: one round, which a final could redraw in every round until its limit became
      # one over the whole final
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from harness.engine.blocks import FINAL_REMEASURED_SHARE, max_remeasured


def gain(blocks: int, limit: int, threshold: float, trials: int, rng: random.Random) -> float:
    """The mean improvement of the blocks' mean score (sd units) with this redraw strategy."""
    total = 0.0
    for _ in range(trials):
        left = limit
        for _ in range(blocks):
            x = rng.gauss(0.0, 1.0)
            while x > threshold and left > 0:
                left -= 1
                x = rng.gauss(0.0, 1.0)
            total += x
    return -total / (trials * blocks)


def false_rejection(blocks: int, limit: int, flag_rate: float) -> float:
    """The chance that more than ``limit`` blocks are flagged before ``blocks`` pass, each measurement
    flagged independently with probability ``flag_rate`` (a negative binomial tail)."""
    passed = (1.0 - flag_rate) ** blocks
    return 1.0 - sum(math.comb(blocks - 1 + k, k) * flag_rate**k * passed for k in range(limit + 1))


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    p.add_argument("--blocks", type=int, nargs="+", default=[10, 1], help="blocks a run")
    p.add_argument("--trials", type=int, default=20000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--flag-rate",
        type=float,
        nargs="+",
        default=[0.04, 0.12],
        help="chances that an honest block is flagged (0.12: about 1 in 8, an H100 lease of 2026-12-07)",
    )
    args = p.parse_args()
    rng = random.Random(args.seed)
    thresholds = [i / 10 for i in range(0, 21)]
    for blocks in args.blocks:
        for limit in sorted({1, max_remeasured(blocks, FINAL_REMEASURED_SHARE), max_remeasured(blocks)}):
            best, at = max((gain(blocks, limit, t, args.trials, rng), t) for t in thresholds)
            honest = ", ".join(f"{100 * false_rejection(blocks, limit, f):.2f}% at {f}" for f in args.flag_rate)
            print(
                f"{blocks} blocks, up to {limit} redrawn: gain {best:.2f} sd (redraw above {at:+.1f} sd); "
                f"honest runs rejected: {honest}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
