"""run-all's progress display: the status line's counts, elapsed time and estimate; redrawn in place
on a terminal, plain lines (only when the counts change) elsewhere."""

from __future__ import annotations

import io

from harness.engine.progress import Progress


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_plain_lines_when_not_a_terminal():
    lines = []
    p = Progress(3, lines.append, stream=io.StringIO())
    assert not p.live
    p.move("queued", "running")
    p.tick()  # same counts: nothing new
    p.move("running", "done")
    p.line("[1/3] a.py: pass 1.00 us [0.1 s]")
    p.close()
    assert lines[0].startswith("jobs: 2 queued, 1 running, 0 done, 0 failed [0:00 elapsed]")
    assert lines[1].startswith("jobs: 2 queued, 0 running, 1 done, 0 failed [0:00 elapsed, about 0:00 left]")
    assert lines[2] == "[1/3] a.py: pass 1.00 us [0.1 s]" and len(lines) == 3  # close adds no repeat


def test_live_line_on_a_terminal_is_redrawn_and_verdicts_stay():
    tty, lines = _Tty(), []
    p = Progress(2, lines.append, stream=tty)
    assert p.live
    p.move("queued", "running")
    p.line("[1/2] a.py: fail")
    p.tick()
    p.close()
    text = tty.getvalue()
    assert text.count("\r\x1b[2K") >= 3 and "jobs: 1 queued, 1 running" in text
    assert lines == ["[1/2] a.py: fail", "jobs: 1 queued, 1 running, 0 done, 0 failed [0:00 elapsed]"]
