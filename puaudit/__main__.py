import sys

from puaudit.cli.commands import main

sys.exit(main())
