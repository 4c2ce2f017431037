"""`python -m annotated_transformer.cli`: the command line, as `python -m annotated_transformer`."""

import sys

from annotated_transformer.cli import main

sys.exit(main())
