"""Layer 6, training (§5): from batches to trained weights.

- `schedule`: Adam and the learning rate of Eq. (3) ("Optimizer and schedule").
- `label_smoothing`: the loss with label smoothing, §5.4 ("Regularization").
- `simple_loop`: the paper's loop, batch → loss → step → schedule, and nothing else ("The
  training loop").
- `loop`: the loop the book trains with: micro-batches, bfloat16, several processes, a progress
  bar; with those off, `simple_loop` ("The training loop").
- `distributed`: one or many processes, with `torchrun` ("Engineering a training run").
- `run`: a whole training run on Multi30k, in a few named steps around one `Run`: resumable,
  interruptible ("Engineering a training run").
- `guards`: one job per run folder, its history kept, divergence stopped, torchrun's variables
  and compile checked ("How the package is built: files, downloads and records").
- `averaging`: the average of the last checkpoints, §6.1 ("Results").
- `fused`: the fast paths, each proven equal to the reference code ("Making it fast").
- `measure`: a step's FLOPs and peak memory, the machine's matrix-multiply rate ("Making it
  fast"); the benchmarks in `benchmarks/` use them too.

It imports every layer below it: `util`, `model`, `data`, `runs` (a run's settings,
checkpoints and saved model), `decoding`, `evaluation`.
"""
