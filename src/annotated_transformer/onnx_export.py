"""Deprecated: this module moved to `annotated_transformer.exports.onnx` in 0.3.0; this old
path still works in 0.3 and goes in 0.4. Import `annotated_transformer.exports.onnx` instead.

Importing it warns (`DeprecationWarning`) and makes this name the new module itself, so that
`from annotated_transformer.onnx_export import ...` gives the very same objects.
"""

import sys
import warnings

from annotated_transformer.exports import onnx

warnings.warn(
    "annotated_transformer.onnx_export moved to annotated_transformer.exports.onnx; the old path "
    "goes in 0.4",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = onnx
