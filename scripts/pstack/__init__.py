"""The patch stack's tooling, in layers that import only downwards:

  core     errors, the line (Line), base pin, git, the patch and series model
  queue    the patch queue: apply, export, check-series, rebase, pr
  install  fetch, setup (a line's venv), wheel
  harness  test, check-bisect, lm-eval, stress, demo, bench
  cli      the command table (`python -m pstack <command>`)
"""
