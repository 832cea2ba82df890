"""The verdict server: a long-lived trusted process that has imported torch, created its CUDA context and
started the warm-worker pool once, and runs ``python -m harness run`` commands for its user.

A ``run`` in a fresh process spends seconds before any verdict work: the interpreter, ``import torch``
(4-5 s on the H200), the parent's CUDA context (about 1 s), and the first worker's wait for the pool's
own imports. With ``python -m harness serve`` running, ``run`` sends its arguments, its folder and the
secret to the server over a Unix socket that only its user can open, and prints what comes back: the
same output, the same exit code. Without a server, or with one started under another environment or
another version of the code, ``run`` runs in its own process as before.

- :mod:`harness.server.address`: where a server listens, named by what must match (the code, the
  interpreter, the environment);
- :mod:`harness.server.daemon`: the server;
- :mod:`harness.server.client`: what ``run`` does when a server listens.

The submission never runs in the server: its workers fork from the pool's server process
(:mod:`harness.engine.pool`), which holds no secret, exactly as in a ``run`` of its own.
"""
