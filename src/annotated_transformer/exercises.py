"""Deprecated: this module moved to `annotated_transformer.book.exercises` in 0.3.0; this old
path still works in 0.3 and goes in 0.4. Import `annotated_transformer.book.exercises` instead.

Importing it warns (`DeprecationWarning`) and makes this name the new module itself, so that
`from annotated_transformer.exercises import ...` gives the very same objects.
"""

import sys
import warnings

from annotated_transformer.book import exercises

warnings.warn(
    "annotated_transformer.exercises moved to annotated_transformer.book.exercises; the old path "
    "goes in 0.4",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = exercises
