"""`python -m local` (what `make run` runs): the whole system on 127.0.0.1; see local/stack.py."""

import sys

from local.stack import main

sys.exit(main())
