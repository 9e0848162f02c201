import sys

from nki_dsl.cli import main

sys.exit(main())
