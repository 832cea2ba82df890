"""The store's schema: one list of migrations for SQLite and PostgreSQL alike.

``MIGRATIONS[i]`` takes a database from version i to i + 1 (SQLite keeps the version in
``PRAGMA user_version``, PostgreSQL in the one-row table ``harness_schema``). Statements are plain
SQL with two dialect words filled in by :func:`statements`: ``{pk}`` (an auto-numbered primary key)
and ``{real}`` (a double-precision float: PostgreSQL's REAL is single precision). Append, never edit
a released step.

  1 - runs (one row per run, with the whole RunResult JSON) and cases (per-case stats, raw samples).
  2 - runs.display_name, indexes for the leaderboard and for history look-ups by content hash.
  3 - jobs: one row per (submission contents, task, mode, harness version) that run-all evaluates,
      with its state (queued, running, done, failed), attempts, node, GPU, timestamps, retry reasons.
  4 - finals and final_blocks (issue #50, harness.store.finals): a final scoring of a board's top entries
      (its key, state, configuration and result) and one row per block of an entry in a round.
  5 - leases: jobs.owner (a driver's uuid) and jobs.lease_expires (epoch seconds, renewed by its
      heartbeat), jobs.failure (why the infrastructure gave up on it: never a verdict); one job per
      (contents, task, mode, harness version), enforced (older duplicates dropped); the 'error' rows
      earlier harnesses stored for failed jobs (the harness's failure, not the submission's) deleted.
"""

from __future__ import annotations

DIALECT_WORDS = {
    "sqlite": {"pk": "INTEGER PRIMARY KEY AUTOINCREMENT", "real": "REAL"},
    "postgresql": {"pk": "SERIAL PRIMARY KEY", "real": "DOUBLE PRECISION"},
}

MIGRATIONS: list[list[str]] = [
    [  # 1
        """CREATE TABLE runs (
            id {pk},
            task TEXT NOT NULL,
            mode TEXT NOT NULL,
            submission_path TEXT NOT NULL,
            submission_sha256 TEXT NOT NULL,
            submission_name TEXT NOT NULL,
            device_name TEXT,
            device_kind TEXT,
            software TEXT NOT NULL DEFAULT '{{}}',
            harness_version TEXT,
            git_commit TEXT,
            started_at TEXT NOT NULL,
            finished_at TEXT,
            wall_s {real},
            verdict TEXT NOT NULL,
            message TEXT NOT NULL DEFAULT '',
            score_us {real},
            complete INTEGER NOT NULL DEFAULT 0,
            result_json TEXT
        )""",
        """CREATE TABLE cases (
            run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            idx INTEGER NOT NULL,
            kind TEXT NOT NULL,
            spec TEXT NOT NULL,
            verdict TEXT NOT NULL,
            message TEXT NOT NULL DEFAULT '',
            runs INTEGER,
            mean_ns {real},
            std_ns {real},
            stderr_ns {real},
            median_ns {real},
            min_ns {real},
            max_ns {real},
            samples_ns TEXT,
            baseline_us {real},
            PRIMARY KEY (run_id, idx)
        )""",
        "CREATE INDEX runs_task ON runs(task)",
    ],
    [  # 2
        "ALTER TABLE runs ADD COLUMN display_name TEXT",
        "UPDATE runs SET display_name = submission_name WHERE display_name IS NULL",
        "CREATE INDEX runs_task_device ON runs(task, device_name, complete)",
        "CREATE INDEX runs_sha256 ON runs(submission_sha256)",
    ],
    [  # 3
        """CREATE TABLE jobs (
            id {pk},
            task TEXT NOT NULL,
            mode TEXT NOT NULL,
            submission_path TEXT NOT NULL,
            submission_sha256 TEXT NOT NULL,
            display_name TEXT NOT NULL,
            harness_version TEXT NOT NULL,
            state TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            node TEXT,
            gpu TEXT,
            driver TEXT,
            run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL,
            verdict TEXT,
            retry_reasons TEXT NOT NULL DEFAULT '[]',
            queued_at TEXT NOT NULL,
            started_at TEXT,
            finished_at TEXT
        )""",
        "CREATE INDEX jobs_key ON jobs(submission_sha256, task, mode, harness_version)",
        "CREATE INDEX jobs_state ON jobs(state, id)",
    ],
    [  # 4
        """CREATE TABLE finals (
            id {pk},
            task TEXT NOT NULL,
            device_name TEXT NOT NULL,
            final_key TEXT NOT NULL,
            state TEXT NOT NULL,
            config TEXT NOT NULL DEFAULT '{{}}',
            result_json TEXT,
            started_at TEXT NOT NULL,
            finished_at TEXT
        )""",
        "CREATE INDEX finals_key ON finals(final_key, state)",
        "CREATE INDEX finals_task ON finals(task, device_name)",
        """CREATE TABLE final_blocks (
            final_id INTEGER NOT NULL REFERENCES finals(id) ON DELETE CASCADE,
            round INTEGER NOT NULL,
            submission_sha256 TEXT NOT NULL,
            verdict TEXT NOT NULL,
            score_us {real},
            message TEXT NOT NULL DEFAULT '',
            detail TEXT NOT NULL DEFAULT '{{}}',
            PRIMARY KEY (final_id, round, submission_sha256)
        )""",
    ],
    [  # 5
        "ALTER TABLE jobs ADD COLUMN owner TEXT",
        "ALTER TABLE jobs ADD COLUMN lease_expires {real}",
        "ALTER TABLE jobs ADD COLUMN failure TEXT",
        "DELETE FROM jobs WHERE id NOT IN"
        " (SELECT MAX(id) FROM jobs GROUP BY submission_sha256, task, mode, harness_version)",
        "CREATE UNIQUE INDEX jobs_unique ON jobs(submission_sha256, task, mode, harness_version)",
        "DELETE FROM runs WHERE id IN (SELECT run_id FROM jobs WHERE state = 'failed' AND run_id IS NOT NULL)",
        "UPDATE jobs SET run_id = NULL, verdict = NULL, failure = 'infrastructure (before leases)'"
        " WHERE state = 'failed'",
        "UPDATE jobs SET state = 'queued', driver = NULL WHERE state = 'running'",
    ],
]
SCHEMA_VERSION = len(MIGRATIONS)


def statements(step: int, dialect: str) -> list[str]:
    """The SQL of migration ``step`` (0-based) for ``dialect`` ('sqlite' or 'postgresql')."""
    words = DIALECT_WORDS[dialect]
    return [s.format(**words) for s in MIGRATIONS[step]]
