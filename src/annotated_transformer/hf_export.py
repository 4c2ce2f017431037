"""Deprecated: this module moved to `annotated_transformer.exports.hf` in 0.3.0; this old
path still works in 0.3 and goes in 0.4. Import `annotated_transformer.exports.hf` instead.

Importing it warns (`DeprecationWarning`) and makes this name the new module itself, so that
`from annotated_transformer.hf_export import ...` gives the very same objects.
"""

import sys
import warnings

from annotated_transformer.exports import hf

warnings.warn(
    "annotated_transformer.hf_export moved to annotated_transformer.exports.hf; the old path "
    "goes in 0.4",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = hf
