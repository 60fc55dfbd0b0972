"""The build: the pinned release files, the CPU runtime in .venv, and the
patched wheels."""
