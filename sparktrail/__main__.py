import sys

from sparktrail.cli import main

sys.exit(main())
