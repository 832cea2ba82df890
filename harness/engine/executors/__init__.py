"""Executors for run-all: where each (submission, task, mode) job runs.

- ``serial`` (:mod:`.serial`): one after another in this process, on this machine's device (default);
- ``ray`` (:mod:`.ray_executor`): one Ray task per job asking for one GPU, on a local or joined cluster.

Both run :func:`harness.engine.executors.job.run_job` per job and report to a
:class:`~harness.engine.executors.job.JobSink`; only the machine's or the harness's failures are retried.
"""
