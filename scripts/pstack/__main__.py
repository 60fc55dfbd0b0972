"""`python -m pstack <command>`: see cli.py."""

import sys

from .cli import main
from .core.errors import exit_with_status

exit_with_status(lambda: main(sys.argv[1:]))
