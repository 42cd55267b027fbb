import sys

from puaudit.cli import main

sys.exit(main())
