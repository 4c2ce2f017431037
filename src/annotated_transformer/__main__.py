"""`python -m annotated_transformer` runs the command line."""

import sys

from annotated_transformer.cli import main

sys.exit(main())
