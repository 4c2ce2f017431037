"""Deprecated: this module moved to `annotated_transformer.runs.averaging` in 0.3.0; this old
path still works in 0.3 and goes in 0.4. Import `annotated_transformer.runs.averaging` instead.

Importing it warns (`DeprecationWarning`) and makes this name the new module itself, so that
`from annotated_transformer.training.averaging import ...` gives the very same objects.
"""

import sys
import warnings

from annotated_transformer.runs import averaging

warnings.warn(
    "annotated_transformer.training.averaging moved to annotated_transformer.runs.averaging; the "
    "old path goes in 0.4",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = averaging
