"""``python -m bugimpact``: the command line, where the package is on the path but not installed
(a GPU node reached by copying the checkout, say)."""
import sys

from .cli import main

sys.exit(main())
