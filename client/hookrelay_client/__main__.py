import sys

from hookrelay_client.cli import main

sys.exit(main())
