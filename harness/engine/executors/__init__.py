"""Executors for run-all: where each (submission, task, mode) job runs.

- ``serial`` (:mod:`.serial`): one after another in this process, on this machine's device (default);
- ``ray`` (:mod:`.ray_executor`): one Ray task per job asking for one GPU, on a local or joined cluster.

Both take their jobs one at a time from a :class:`~harness.engine.executors.job.JobSource` (the
driver claims each in the store when a slot is free), run :func:`harness.engine.executors.job.run_job`
per job and report to a :class:`~harness.engine.executors.job.JobSink`; only the machine's or the
harness's failures are retried, with backoff. Also here: :mod:`.cleanup` (temporary folders of killed
processes) and :mod:`.ray_auth` (Ray's token authentication for a joined cluster).
"""
