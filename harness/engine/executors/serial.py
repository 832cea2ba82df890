"""The serial executor: every job in this process, one after another, on this machine's device."""

from __future__ import annotations

import time

from harness.engine.executors.job import JobSink, JobSpec, job_start, run_job
from harness.engine.options import RunOptions


class SerialExecutor:
    name = "serial"

    def __init__(self, retries: int = 2):
        self.retries = retries

    @property
    def slots(self) -> int:
        return 1

    def run(self, specs: list[JobSpec], options: RunOptions, sink: JobSink) -> None:
        for spec in specs:
            for attempt in range(self.retries + 1):
                spec.submitted_at = time.time()
                start = job_start(spec)
                sink.started(spec, start)
                report = run_job(spec, options, start)  # a UsageError stops the whole run
                if report.result is not None:
                    sink.finished(spec, report.result)
                    break
                if attempt < self.retries:
                    sink.retrying(spec, report.retry_reason)
                else:
                    sink.failed(spec, report.retry_reason)

    def close(self) -> None:
        pass
