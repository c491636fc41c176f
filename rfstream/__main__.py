"""``python -m rfstream``: the command line, as the ``rfstream`` console script (:mod:`rfstream.cli`)."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
