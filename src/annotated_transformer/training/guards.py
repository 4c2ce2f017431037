"""Deprecated: this module's pieces moved to the modules that own them in 0.3.0; this old path
still works in 0.3 and goes in 0.4. Import each name from its new module instead:

- `training.run_folder`: `LOCK`, `RunInUse`, `RunLock`, `check_history`, `check_not_in_use`,
  `damage`, `holds_a_run`, `in_use`, `json_line` (the run folder's lock, history and files);
- `training.epochs`: `Diverged`, `diverged`, `not_finite` (a diverged step);
- `training.distributed`: `torchrun_environment` (torchrun's variables);
- `training.signals`: `leave_the_terminal` (after SIGHUP);
- `training.training_checks`: `check_compile` (compile=true's compiler).

Importing it warns (`DeprecationWarning`); each name is the very object of its new module.
"""

import warnings

from annotated_transformer.training.distributed import torchrun_environment
from annotated_transformer.training.epochs import Diverged, diverged, not_finite
from annotated_transformer.training.run_folder import (
    LOCK,
    RunInUse,
    RunLock,
    check_history,
    check_not_in_use,
    damage,
    holds_a_run,
    in_use,
    json_line,
)
from annotated_transformer.training.signals import leave_the_terminal
from annotated_transformer.training.training_checks import check_compile

__all__ = [
    "LOCK", "Diverged", "RunInUse", "RunLock", "check_compile", "check_history",
    "check_not_in_use", "damage", "diverged", "holds_a_run", "in_use", "json_line",
    "leave_the_terminal", "not_finite", "torchrun_environment",
]  # fmt: skip

warnings.warn(
    "annotated_transformer.training.guards moved: each name is now in the module that owns it "
    "(run_folder, epochs, distributed, signals, training_checks); the old path goes in 0.4",
    DeprecationWarning,
    stacklevel=2,
)
