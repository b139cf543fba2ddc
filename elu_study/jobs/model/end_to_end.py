"""Whole steps of four models with ELU, nn.ELU against the drop-in, with ELU's share of each step.

A row's times: ``PAIRS`` pairs of runs, one run of each net per pair, who goes first alternating; each run
``steps_per_run`` steps back to back, timed by CUDA events (host gaps included) and at least ``RUN_MS`` long: one
step of the small MLPs spread the paired ratios by 10 % and more, beyond what the drop-in's host time can move them.
A pair shares the GPU's clocks, whose drift over seconds (the power cap) cancels in its ratio."""

import copy
import gc
import re
from typing import NamedTuple

import numpy as np
import torch
from torch import nn
from tqdm import tqdm  # text bars: tqdm.auto warns on stderr in a notebook without ipywidgets

from elu_study.pytorch.nn import swap_elu

PAIRS, WARMUP_PAIRS, WARMUP_STEPS = 40, 3, 5
# Compiled, both nets run one graph (Dynamo hands Inductor F.elu): the timer against itself, in two of the four
# (mode, bfloat16 autocast) configurations of each MLP; not ResNet-18, whose compiles (15-30 s each) would double the
# job's time for two more such bars.
COMPILED = (("train", False), ("infer", True))
RUN_MS = 25.0  # a timed run's length at least: as many whole steps as that takes (one step where it takes longer)
TIMER = "cuda_events"  # a row's "timer": each run timed by CUDA events; before: "wall_clock"
ELU_KERNEL = re.compile(r"elu|step6|step7", re.IGNORECASE)  # aten's elu kernels, the study's, fused Triton ones
CNN_CLASSES = 10


class Model(NamedTuple):
    name: str
    width: int  # 0: the CNN, batch x 3 x size x size
    batch: int
    size: int = 0


# ResNet-18 at the batch it trains at on ImageNet: at batch 64 the host paced its eager steps on the H200 (the device
# busy 0.34 to 0.64 of a step), where no kernel can shorten a step; at 256 the device works four times as long.
CNN_BATCH = 256
MODELS = (Model("MLP 4x256, batch 64", 256, 64), Model("MLP 4x2048, batch 512", 2048, 512),
          Model("MLP 4x8192, batch 4096", 8192, 4096),
          Model(f"timm ResNet-18 with ELU, batch {CNN_BATCH} at 224x224, channels_last", 0, CNN_BATCH, 224))


def build(model: Model) -> nn.Module:
    if model.width:
        layers = [m for _ in range(4) for m in (nn.Linear(model.width, model.width), nn.ELU())]
        return nn.Sequential(*layers, nn.Linear(model.width, model.width)).cuda()
    import timm  # noqa: PLC0415 - lazy: only the GPU job builds the CNN (timm is on the GPU machine, not a dependency)

    net = timm.create_model("resnet18", act_layer=nn.ELU, num_classes=CNN_CLASSES)
    return net.cuda().to(memory_format=torch.channels_last)


def batch(model: Model, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    if model.width:
        return tuple(torch.randn(model.batch, model.width, device="cuda", generator=gen) for _ in range(2))
    x = torch.randn(model.batch, 3, model.size, model.size, device="cuda", generator=gen)
    return (x.contiguous(memory_format=torch.channels_last),
            torch.randn(model.batch, CNN_CLASSES, device="cuda", generator=gen))


def stepper(net: nn.Module, mode: str, autocast: bool, compiled: bool):
    """One step of ``net`` as a function of (x, target): train (forward, MSE, backward, SGD) or infer."""
    forward = torch.compile(net) if compiled else net
    opt = torch.optim.SGD(net.parameters(), lr=1e-4, momentum=0.9, foreach=True)

    def train(x, target):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            loss = nn.functional.mse_loss(forward(x).float(), target)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def infer(x, target):
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            forward(x)

    return train if mode == "train" else infer


def profiled_step(step, x, target) -> dict:
    """One profiled step's device time (ms): ELU's kernels (``elu_ms``) and all it ran, copies too (``device_ms``)."""
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        step(x, target)
        torch.cuda.synchronize()
    device = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return {"elu_ms": sum(e.device_time_total for e in device if ELU_KERNEL.search(e.name)) / 1e3,
            "device_ms": sum(e.device_time_total for e in device) / 1e3}


def steps_per_run(steps: dict, x, target) -> int:
    """How many whole steps make a run of at least RUN_MS: from the slower net's step, timed over a few."""
    step_ms = max(np.median(v) for v in paired_steps_ms(steps, x, target, 3, WARMUP_STEPS).values())
    return max(1, int(np.ceil(RUN_MS / step_ms)))


def paired_steps_ms(steps: dict, x, target, pairs: int, per_run: int) -> dict[str, list[float]]:
    """Each net's time per step (ms) over ``pairs`` pairs of runs of ``per_run`` steps, one run of each net per
    pair, who goes first alternating: CUDA events recorded around every run on the current stream, read after one
    synchronization at the end (the host runs ahead as in training), the garbage collector off."""
    names = list(steps)
    marks = {e: [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(pairs)]
             for e in names}
    torch.cuda.synchronize()
    gc.disable()
    try:
        for i in range(pairs):
            for e in (names if i % 2 == 0 else names[::-1]):
                start, end = marks[e][i]
                start.record()
                for _ in range(per_run):
                    steps[e](x, target)
                end.record()
        torch.cuda.synchronize()
    finally:
        gc.enable()
    return {e: [start.elapsed_time(end) / per_run for start, end in marks[e]] for e in names}


def config_rows(model: Model, mode: str, autocast: bool, compiled: bool) -> list[dict]:
    """The two rows (nn.ELU, drop-in) of one configuration, timed in alternating pairs of runs."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    torch.manual_seed(0)
    base = build(model)
    x, target = batch(model, gen)
    steps = {e: stepper(net, mode, autocast, compiled) for e, net in (("nn.ELU", base),
                                                                     ("drop-in", swap_elu(copy.deepcopy(base))))}
    for s in steps.values():  # compiles, allocator, cuDNN's choices and caches settled
        for _ in range(WARMUP_STEPS):
            s(x, target)
        torch.cuda.synchronize()
    per_run = steps_per_run(steps, x, target)
    paired_steps_ms(steps, x, target, WARMUP_PAIRS, per_run)
    times = paired_steps_ms(steps, x, target, PAIRS, per_run)
    return [{"model": model.name, "dtype": "bfloat16 autocast" if autocast else "float32", "mode": mode,
             "compiled": compiled, "elu": e, "ms": float(np.median(times[e])),
             "noise_ms": float(np.quantile(times[e], 0.9) - np.quantile(times[e], 0.1)),
             "ms_runs": [round(t, 4) for t in times[e]], "steps_per_run": per_run, "timer": TIMER,
             **profiled_step(s, x, target)}
            for e, s in steps.items()]


def measure_end_to_end(compiled: bool) -> list[dict]:
    """end_to_end's rows, eager or compiled: every model x mode x dtype (compiled: the MLPs' in COMPILED) x (nn.ELU,
    drop-in)."""
    torch.backends.cuda.matmul.allow_tf32 = True  # float32 matmuls in TF32, as models are trained
    torch.backends.cudnn.allow_tf32 = True
    rows = []
    configs = [(m, mode, a) for m in MODELS for a in (False, True) for mode in ("train", "infer")
               if not compiled or (mode, a) in COMPILED and m.width]
    for m, mode, a in tqdm(configs, desc=f"end to end, {'compiled' if compiled else 'eager'}", unit="config"):
        rows += config_rows(m, mode, a, compiled)
        torch._dynamo.reset()
    return rows
