"""`python -m storage_core.tools`: the `kafkalog` command."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
