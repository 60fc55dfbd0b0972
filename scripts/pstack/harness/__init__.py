"""The test and evaluation harness: the test run, check-bisect, the lm-eval
gate, the stress test, the demo and the benchmarks, with what they share
(local models, hub stand-ins, the offline environment, the engine probe).

These run in a line's venv, next to its patched vLLM.
"""
