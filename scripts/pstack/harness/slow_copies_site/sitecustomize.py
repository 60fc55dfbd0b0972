"""Run at the start of every Python process of `make slow-copies`, which
puts this folder on PYTHONPATH (with the repository's scripts/): the
processes its tests start delay their transfers as the pytest process
does (pstack/harness/slow_copies_hook.py). It hides a sitecustomize.py
of the Python's own, if one was installed (the lines' venvs have none)."""

import os

if os.environ.get("PSTACK_COPY_DELAY_S"):
    from pstack.harness.slow_copies_hook import install

    install(float(os.environ["PSTACK_COPY_DELAY_S"]))
