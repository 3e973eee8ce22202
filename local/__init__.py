"""Local-only code: provisioning on moto, the HTTP-to-API-Gateway bridge, the queue pollers.

Nothing here is deployed; the Lambda handlers never import it.
"""

import sys
from pathlib import Path

# `python -m local…` runs from the repository root; the Lambda code's import root is `lambdas/`, as in
# the deployed asset, so put it on the path the way the Lambda runtime does.
_LAMBDA_ROOT = str(Path(__file__).resolve().parents[1] / "lambdas")
if _LAMBDA_ROOT not in sys.path:
    sys.path.insert(0, _LAMBDA_ROOT)
