"""``python -m threelc.launcher``: threelcrun with the Python that runs it."""

import sys

from .main import main

sys.exit(main())
