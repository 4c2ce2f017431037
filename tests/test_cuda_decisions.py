"""Every place where CUDA changes what the code does, exercised without a GPU (issue 34, part 1).

A decision is either a small pure function called with `torch.device("cuda")` (a device can be
named without being present), or the code run with PyTorch's CUDA calls replaced by recorders
(`monkeypatch`), or run on the `meta` device (shapes and devices, no data). The chapter "Making
it fast" lists them in its section "On a GPU", naming these tests.
"""

import sys
import types
from argparse import Namespace

import torch
from common import on_device

from annotated_transformer import variations
from annotated_transformer.data.batch import Batch
from annotated_transformer.model.masks import padding_mask, subsequent_mask
from annotated_transformer.model.transformer import ModelConfig, build_model
from annotated_transformer.profile import current_profile
from annotated_transformer.training import distributed, loop, measure, run_state
from annotated_transformer.training import run as training_run
from annotated_transformer.translator import Translator
from annotated_transformer.util.device import describe_device

CUDA = torch.device("cuda")
CPU = torch.device("cpu")


class Calls(list):
    """A recorder standing in for a torch.cuda function: each call's arguments, then `value`."""

    def __init__(self, value=None):
        super().__init__()
        self.value = value

    def __call__(self, *args, **kwargs):
        self.append(args)
        return self.value() if callable(self.value) else self.value


def small_batch(device: str | torch.device = "cpu") -> Batch:
    src = torch.tensor([[4, 5, 6, 2], [7, 8, 2, 0]])
    tgt = torch.tensor([[1, 4, 5, 2], [1, 6, 2, 0]])
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    tgt_mask = (tgt_in != 0).unsqueeze(-2) & subsequent_mask(tgt_in.size(-1))
    batch = Batch(src, padding_mask(src, 0), tgt_in, tgt_out, tgt_mask, int((tgt_out != 0).sum()))
    return batch.to(device)


def test_autocast_is_bfloat16_on_cuda_only():
    assert run_state.autocast_dtype(True, CUDA) is torch.bfloat16
    assert run_state.autocast_dtype(True, CPU) is None  # a CPU ignores bf16
    assert run_state.autocast_dtype(False, CUDA) is None


def test_autocast_takes_the_device_type_of_the_batch(monkeypatch):
    seen = []
    real = torch.autocast

    def recording(device_type, **kwargs):
        seen.append((device_type, kwargs["dtype"], kwargs["enabled"]))
        return real("cpu", enabled=False)

    monkeypatch.setattr(loop.torch, "autocast", recording)
    with torch.device("meta"):  # the model and the batch on `meta`: shapes only, no data
        model = build_model(ModelConfig(src_vocab=10, tgt_vocab=10, N=1, d_model=8, d_ff=16, h=2))
    loss = loop.batch_loss(
        model, small_batch("meta"), lambda log_probs, _: log_probs.sum(), torch.bfloat16
    )
    assert loss.device.type == "meta" and seen == [("meta", torch.bfloat16, True)]


def test_batches_move_with_non_blocking_copies():
    moved = small_batch().to("meta", non_blocking=True)
    tensors = (moved.src, moved.src_mask, moved.tgt_in, moved.tgt_out, moved.tgt_mask)
    assert {t.device.type for t in tensors} == {"meta"} and moved.ntokens == 5


def test_the_cuda_random_generator_is_saved_and_restored(monkeypatch):
    get, put = Calls(lambda: torch.tensor([7], dtype=torch.uint8)), Calls()
    monkeypatch.setattr(torch.cuda, "get_rng_state", get)
    monkeypatch.setattr(torch.cuda, "set_rng_state", put)
    state = run_state.rng_state(CUDA)
    assert get == [(CUDA,)] and state["cuda"].tolist() == [7]
    run_state.set_rng_state(state, CUDA)
    assert len(put) == 1 and put[0][1] == CUDA
    assert "cuda" not in run_state.rng_state(CPU)  # a CPU run saves no CUDA state
    run_state.set_rng_state(run_state.rng_state(CPU), CPU)
    assert len(get) == 1 and len(put) == 1


def torchrun(monkeypatch, world_size: int, local_rank: int = 1):
    monkeypatch.setattr(distributed, "torchrun_environment", lambda: (1, world_size, local_rank))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "set_device", set_device := Calls())
    monkeypatch.setattr(distributed.dist, "is_initialized", lambda: False)
    monkeypatch.setattr(distributed.dist, "init_process_group", joined := Calls())
    return set_device, joined


def test_processes_on_gpus_meet_over_nccl_each_on_its_own_gpu(monkeypatch):
    set_device, joined = torchrun(monkeypatch, world_size=2, local_rank=1)
    procs = distributed.init_processes()  # the default device: CUDA, as there is one
    assert procs.device == torch.device("cuda", 1) and procs.backend == "nccl"
    assert set_device == [(torch.device("cuda", 1),)] and joined == [("nccl",)]


def test_processes_on_cpus_meet_over_gloo(monkeypatch):
    set_device, joined = torchrun(monkeypatch, world_size=2)
    procs = distributed.init_processes("cpu")
    assert procs.device == CPU and procs.backend == "gloo" and joined == [("gloo",)]
    assert set_device == []


def test_a_process_alone_on_a_gpu_joins_no_group(monkeypatch):
    _, joined = torchrun(monkeypatch, world_size=1)
    procs = distributed.init_processes()
    assert procs.device == CUDA and procs.backend is None and joined == []


def test_ddp_names_the_gpu_with_nccl_only(monkeypatch):
    wrapped = Calls()
    monkeypatch.setattr(training_run, "DistributedDataParallel", lambda net, **kw: wrapped(kw))
    config = types.SimpleNamespace(compile=False)
    for backend, device, ids in (("nccl", torch.device("cuda", 1), [torch.device("cuda", 1)]),
                                 ("gloo", CPU, None)):  # fmt: skip
        procs = distributed.Processes(0, 2, 1, device, backend)
        training_run.wrap(torch.nn.Linear(2, 2), config, procs)
        assert wrapped[-1] == ({"device_ids": ids},)


def test_timings_wait_for_the_gpu(monkeypatch):
    synchronize = Calls()
    monkeypatch.setattr(torch.cuda, "synchronize", synchronize)
    work = Calls()
    assert measure.timed(work, CUDA) >= 0 and synchronize == [(CUDA,), (CUDA,)] and len(work) == 1
    measure.timed(work, CPU)
    assert len(synchronize) == 2  # a CPU has nothing to wait for


def test_peak_memory_reads_the_cuda_allocator(monkeypatch):
    allocator = {"synchronize": None, "memory_allocated": 1000, "reset_peak_memory_stats": None,
                 "max_memory_allocated": 5096}  # fmt: skip
    for name, value in allocator.items():
        monkeypatch.setattr(torch.cuda, name, Calls(value))
    step = Calls()
    assert measure.peak_step_memory(step, CUDA) == 4096 and len(step) == 1
    assert len(torch.cuda.reset_peak_memory_stats) == 1


def test_records_name_the_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", Calls("NVIDIA H100 80GB HBM3"))
    assert describe_device(CUDA) == "NVIDIA H100 80GB HBM3"
    assert describe_device(CPU).startswith("cpu (")


def test_the_benchmarks_choices_on_cuda():
    cuda, cpu = on_device(CUDA), on_device(CPU)
    assert (cuda.autocast, cuda.matmul_size, cuda.fused_adam, cuda.backend) == (
        torch.bfloat16, 8192, True, "nccl"
    )  # fmt: skip
    assert (cpu.autocast, cpu.matmul_size, cpu.fused_adam, cpu.backend) == (
        None,
        2048,
        False,
        "gloo",
    )
    assert on_device(CPU, bf16=True).autocast is torch.bfloat16  # --bf16 on a CPU


def test_the_profile_is_full_on_cuda():
    assert current_profile({}, cuda=True).name == "full"
    assert current_profile({}, cuda=True).device == "cuda"
    assert current_profile({}, cuda=False).device == "cpu"


def test_the_translator_loads_onto_the_gpu_by_default(monkeypatch):
    moved = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.nn.Module, "to", lambda self, device: moved.append(device) or self)
    Translator.pretrained()
    assert moved == [CUDA]


def test_the_grid_records_a_gpu_run_apart(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(variations, "recorded", lambda *args: {})  # all recorded: nothing to train
    monkeypatch.chdir(tmp_path)
    args = Namespace(device=None, profile="quick", only=None, results=None, runs="runs",
                     data_dir=None, jobs=1)  # fmt: skip
    assert variations.run_grid(args) == 0
    assert "records in results/variations-quick-cuda" in capsys.readouterr().out


def test_the_command_line_names_the_gpus(monkeypatch, capsys):
    from annotated_transformer import cli

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: f"GPU {i}")
    monkeypatch.setattr(sys, "argv", ["annotated-transformer", "info"])
    assert cli.main(["info"]) == 0
    assert "device: cuda (GPU 0, GPU 1)" in capsys.readouterr().out
