import sys

from . import loader

loader.lazy()  # before torch is imported: its functions bound at their first call, where asked
from .run import main  # noqa: E402 (imports torch)

loader.mark()  # the run's calls are what the loader binds from here on
sys.exit(main())
