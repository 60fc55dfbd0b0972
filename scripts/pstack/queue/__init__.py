"""The patch queue: vllm-src made from patches/ and written back to it,
checked, rebased onto new releases and prepared for upstream PRs.

Stdlib only, like the core: these commands run before any venv exists.
"""
