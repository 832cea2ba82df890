"""The results store: runs, cases and run-all's job table, in SQLite or PostgreSQL.

- :mod:`.database`: :func:`open_store` (a folder, a .sqlite file or a postgresql:// URL) and :class:`Store`;
- :mod:`.schema`: the one list of migrations both engines run;
- :mod:`.backends`: the SQLite and PostgreSQL connections (transactions, retries, clear errors);
- :mod:`.rows`: the dataclasses read back (RunRow, CaseRow);
- :mod:`.jobs`: the job table (queued, running, done, failed), claimed by lease;
- :mod:`.spool`: results kept in local files while the store is unreachable.
"""
