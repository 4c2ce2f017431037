"""tools/walk.py follows `train` through the trainer's modules (issue 62): the counts it prints
are the ones the note on the trainer's shape gives, and a guard rail moved back into a module of
its own would show in them."""

import walk


def test_the_walk_follows_train_through_the_trainer_and_counts_its_moves():
    reader = walk.walk(steps=1)
    counts = reader.counts()
    modules = set(reader.path)
    assert all(module.startswith("annotated_transformer.training.") for module in modules)
    assert {"annotated_transformer.training.run", "annotated_transformer.training.epochs",
            "annotated_transformer.training.run_folder"} <= modules  # fmt: skip
    assert "annotated_transformer.training.guards" not in modules  # each guard with its owner
    assert counts["check_run_folder"] == 2  # before any write, and again under the lock
    assert counts["entries"] == len(reader.path) - 1 and 0 < counts["returns"] < counts["entries"]
