"""Run by tests/test_real_world.py under torchrun (or alone): train, then save this rank's weights.

python ddp_worker.py RUN_DIR DATA_DIR ACCUMULATE MAX_STEPS
"""

import os
import sys

import torch

from annotated_transformer.runs.presets import preset
from annotated_transformer.training.run import train

run_dir, data_dir, accumulate, max_steps = sys.argv[1:5]
config = preset(
    "tiny", dropout=0.0, accumulate=int(accumulate), max_steps=int(max_steps), epochs=None,
    eval_every=1000,
)  # fmt: skip
outcome = train(config, run_dir, data_dir=data_dir, device="cpu", progress=False)
rank = int(os.environ.get("RANK", "0"))
torch.save(outcome.model.state_dict(), os.path.join(run_dir, f"weights-rank{rank}.pt"))
