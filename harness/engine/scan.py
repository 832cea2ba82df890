"""Static pre-scan of a submission's source with ``kernelguard`` (optional dependency).

kernelguard is a rule-based detector built from cheating submissions of GPU-kernel competitions
(output caches keyed by pointers or shapes, timer monkeypatching, CUDA-graph replay, ...). It reads
the source only; nothing runs. Each match becomes a finding ``{"rule", "severity", "message",
"blocking"}``; ``blocking`` is kernelguard's own auto-filter decision (classification "hacked"), which
is what ``--scan-policy reject`` acts on. Lower-confidence rules (e.g. DECODE_MM_REF, which flags the
honest torch_nvfp4 example for calling torch.bmm) only warn.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType
from typing import Any

from harness.errors import UsageError
from harness.optional import import_optional

POLICIES = ("warn", "reject", "off")

Finding = dict[str, Any]  # {"rule", "severity", "message", "blocking"}, stored as JSON with the result


class ScanUnavailable(UsageError):
    """kernelguard is not installed; the message names the 'scan' extra that installs it."""


def _kernelguard() -> ModuleType:
    try:
        return import_optional("kernelguard", "scan")
    except UsageError as exc:
        raise ScanUnavailable(f"{exc}; or pass --scan-policy off") from exc


def require_scanner() -> None:
    """Raises :class:`ScanUnavailable` (exit 2) when kernelguard is missing: ``--scan-policy reject``
    must not pass a submission it could not scan."""
    _kernelguard()


def scan_source(source: str) -> tuple[list[Finding], bool]:
    """(findings, blocking): the rule matches, and whether kernelguard would filter the submission."""
    kernelguard = _kernelguard()
    report = kernelguard.analyze_code(source, compute_structural_hash=False)
    hacked = bool(report.get("should_filter"))
    findings = []
    for match in report.get("matched_patterns", []):
        rule = str(match.get("pattern", "?"))
        blocking = hacked and _auto_filters(kernelguard, rule)
        findings.append(
            {
                "rule": rule,
                "severity": str(match.get("severity", "?")),
                "message": str(match.get("evidence", "")),
                "blocking": blocking,
            }
        )
    return findings, hacked


def _auto_filters(kernelguard: ModuleType, rule: str) -> bool:
    try:
        return bool(kernelguard.classify([{"pattern": rule, "field": "code", "severity": "critical"}])[1])
    except Exception:
        return True


def scan_file(path: str | os.PathLike[str]) -> tuple[list[Finding], bool]:
    return scan_source(Path(path).read_text(errors="replace"))


def prescan(path: str | os.PathLike[str], policy: str, warnings: list[str]) -> tuple[list[Finding], str | None]:
    """The static scan before a ranked run: (findings, the rejection message when ``policy`` is
    "reject" and kernelguard would filter the submission, else None). Findings become warnings; a
    missing kernelguard is a warning too."""
    try:
        findings, hacked = scan_file(path)
    except ScanUnavailable as exc:
        if policy == "reject":
            raise  # RunOptions.validate checks first; a scanner that vanished since is still no pass
        warnings.append(f"static scan skipped: {exc}")
        return [], None
    for f in findings:
        warnings.append(f"static scan: {f['rule']} ({f['severity']}): {f['message']}")
    if hacked and policy == "reject":
        rules = ", ".join(sorted({f["rule"] for f in findings if f.get("blocking")}))
        return findings, (
            f"rejected by the static scan before running (--scan-policy reject): {rules}; see the findings"
        )
    return findings, None
