import sys

from kcoord.server.cli import main

sys.exit(main())
