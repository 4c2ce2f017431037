"""Layer 6, training (§5): from batches to trained weights.

- `schedule`: Adam and the learning rate of Eq. (3) ("Optimizer and schedule").
- `label_smoothing`: the loss with label smoothing, §5.4 ("Regularization").
- `simple_loop`: the paper's loop, batch → loss → step → schedule, and nothing else ("The
  training loop").
- `loop`: the step the book's trainer takes: micro-batches, bfloat16, several processes; with
  those off, a step of `simple_loop` ("The training loop"; the trainer's epoch is `epochs`).
- `distributed`: one or many processes, with `torchrun`, and torchrun's variables checked
  ("Engineering a training run"; the check: appendix "How the package is built: files, downloads
  and records", as for the other guard rails below).
- The trainer, a module per section of "Engineering a training run":

  - `run`: a whole training run on Multi30k (or WMT 2014), in a few named steps around one `Run`:
    set up, epochs, the end; resumable, interruptible ("The trainer", "Setting up", "The end").
  - `inputs`: what a run reads, the data of §5.1 ("What a run reads").
  - `run_folder`: what a run writes beside its checkpoints, and the folders it refuses to write
    into ("Safeguards: the run folder, signals, the log"); its guard rails: one job per folder
    (`RunLock`), its history kept (`check_history`), a damaged run file named (`damage`), the
    log's JSON (`json_line`).
  - `signals`: SIGINT, SIGTERM and SIGHUP save and stop a run (the same section); a closed
    terminal left (`leave_the_terminal`).
  - `run_state`: the `Run` every step reads and changes, its random states, its `Outcome` ("The
    state of a run").
  - `epochs`: a run's steps, metrics lines, validations and checkpoints ("One epoch", "Validating
    and saving"); a diverged run stopped (`Diverged`, `not_finite`).

- `fused`: the fast paths, each proven equal to the reference code ("Making it fast").
- `training_checks`: the arguments of the schedule, the loss and a step (appendix
  "How the package is built: settings, profiles and errors"), and `compile=true`'s compiler
  (`check_compile`); the modules above import it.
- `measure`: a step's FLOPs and peak memory, the machine's matrix-multiply rate ("Making it
  fast"); the benchmarks in `benchmarks/` use them too.

It imports every layer below it: `util`, `model`, `data`, `runs` (a run's settings,
checkpoints and saved model), `decoding`, `evaluation`.
"""
