"""`make lm-eval`, the correctness gate: gate.py runs it, worker.py
evaluates each configuration in its own process (protocol.py: what they
exchange), verdict.py judges the results, task.py makes the local task's
data."""
