"""The serial executor: every job in this process, one after another, on this machine's device."""

from __future__ import annotations

import time

from harness.engine.executors.job import JobSink, JobSource, JobSpec, job_start, retry_delay_s, run_job
from harness.engine.options import RunOptions

POLL_S = 0.5  # nothing claimable now: look again this often (another driver's job may come free)


class SerialExecutor:
    name = "serial"

    def __init__(self, retries: int = 2):
        self.retries = retries

    @property
    def slots(self) -> int:
        return 1

    def run(self, source: JobSource, options: RunOptions, sink: JobSink) -> None:
        while True:
            spec = source.next()
            if spec is not None:
                self._run_one(spec, options, sink)
            elif source.exhausted():
                return
            else:
                sink.tick()
                time.sleep(POLL_S)

    def _run_one(self, spec: JobSpec, options: RunOptions, sink: JobSink) -> None:
        for attempt in range(self.retries + 1):
            spec.submitted_at = time.time()
            start = job_start(spec)
            sink.started(spec, start)
            report = run_job(spec, options, start)  # a UsageError stops the whole run
            if report.result is not None:
                sink.finished(spec, report.result)
                return
            reason = report.retry_reason or "no result and no reason (a bug in the harness)"
            if attempt < self.retries:
                sink.retrying(spec, reason)
                time.sleep(retry_delay_s(attempt))
            else:
                sink.failed(spec, reason)

    def close(self) -> None:
        pass
