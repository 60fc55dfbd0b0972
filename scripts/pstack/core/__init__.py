"""What every command stands on: errors and progress, where things live,
the base pin, the generated git repository and the patches of the series.

Modules here import only the standard library and each other: the patch
queue runs with the system Python before .venv exists.
"""
