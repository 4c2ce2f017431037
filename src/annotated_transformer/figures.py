"""Deprecated: this module moved to `annotated_transformer.book.figures` in 0.3.0; this old
path still works in 0.3 and goes in 0.4. Import `annotated_transformer.book.figures` instead.

Importing it warns (`DeprecationWarning`) and makes this name the new module itself, so that
`from annotated_transformer.figures import ...` gives the very same objects.
"""

import sys
import warnings

from annotated_transformer.book import figures

warnings.warn(
    "annotated_transformer.figures moved to annotated_transformer.book.figures; the old path "
    "goes in 0.4",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = figures
