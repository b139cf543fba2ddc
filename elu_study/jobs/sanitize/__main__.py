"""``python -m elu_study.jobs.sanitize``: the same as ``python -m elu_study sanitize``."""

import sys

from elu_study.jobs.sanitize import main

sys.exit(main())
