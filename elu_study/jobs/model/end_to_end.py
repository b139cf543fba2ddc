"""Whole steps of models with ELU, nn.ELU against the drop-in (``end_to_end``), with ELU's share of each step.

Four models, from one where the host paces a step to ones where ELU's bytes matter: ELU MLPs of three
widths (``MODELS``) and timm's ResNet-18 with ELU as its activation (in place, after each batch norm), in
channels_last. Each runs a training step (forward, loss, backward, an SGD step) or an inference step
(forward under ``torch.no_grad``), in float32 or under bfloat16 autocast, eager or under ``torch.compile``,
once with nn.ELU and once with the same weights through ``swap_elu``.

A row's time is wall clock per step over ``k`` steps and one synchronization (the garbage collector off, as
timeit has it), the median of ``ROUNDS`` rounds in which nn.ELU and the drop-in alternate; ``noise_ms`` is
the p10-p90 spread of those rounds. The comparison (analysis.end_to_end) pairs the two rows round by round,
so that the host's drift between rounds cancels. ELU's share of a step: the device time of its kernels
(aten's, the study's, or a fused Triton kernel holding it) in one profiled step, over the step's time.
"""

from __future__ import annotations

import copy
import gc
import math
import re
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from elu_study.pytorch.nn import swap_elu

ROUNDS, ROUND_MS, WARMUP_STEPS = 15, 60.0, 5
ELU_KERNEL = re.compile(r"elu|step6|step7", re.IGNORECASE)  # aten's elu kernels, the study's, fused Triton ones


@dataclass(frozen=True)
class Model:
    name: str
    kind: str  # "mlp" or "cnn"
    width: int
    depth: int
    batch: int
    size: int = 0  # the CNN's image side


MODELS = (
    Model("MLP 4x256, batch 64", "mlp", 256, 4, 64),
    Model("MLP 4x2048, batch 512", "mlp", 2048, 4, 512),
    Model("MLP 4x8192, batch 4096", "mlp", 8192, 4, 4096),
    Model("timm ResNet-18 with ELU, batch 64 at 224x224, channels_last", "cnn", 0, 0, 64, 224),
)
CNN_CLASSES = 10


def build(model: Model) -> nn.Module:
    if model.kind == "mlp":
        layers = [m for _ in range(model.depth) for m in (nn.Linear(model.width, model.width), nn.ELU())]
        return nn.Sequential(*layers, nn.Linear(model.width, model.width))
    import timm  # lazy: only the GPU job builds the CNN (timm is on the GPU machine, not a dependency)

    return timm.create_model("resnet18", act_layer=nn.ELU, num_classes=CNN_CLASSES)


def batch(model: Model, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    if model.kind == "mlp":
        x = torch.randn(model.batch, model.width, device="cuda", generator=gen)
        return x, torch.randn(model.batch, model.width, device="cuda", generator=gen)
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


def wall_ms(step, x, target, steps: int) -> float:
    """Wall clock per step over ``steps`` steps and one synchronization, the garbage collector off (as timeit)."""
    torch.cuda.synchronize()
    gc.disable()
    try:
        t0 = time.perf_counter()
        for _ in range(steps):
            step(x, target)
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3 / steps
    finally:
        gc.enable()


def elu_device_ms(step, x, target) -> float:
    """Device time of ELU's kernels in one profiled step."""
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        step(x, target)
        torch.cuda.synchronize()
    return sum(e.device_time_total for e in prof.key_averages() if ELU_KERNEL.search(e.key)) / 1e3


def config_rows(model: Model, mode: str, autocast: bool, compiled: bool, rounds: int = ROUNDS) -> list[dict]:
    """The two rows (nn.ELU, drop-in) of one configuration, timed in alternating rounds."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    torch.manual_seed(0)
    base = build(model).cuda()
    if model.kind == "cnn":
        base = base.to(memory_format=torch.channels_last)
    nets = {"nn.ELU": base, "drop-in": swap_elu(copy.deepcopy(base))}
    x, target = batch(model, gen)
    steps = {k: stepper(n, mode, autocast, compiled) for k, n in nets.items()}
    for s in steps.values():
        for _ in range(WARMUP_STEPS):
            s(x, target)
    k = max(2, math.ceil(ROUND_MS / wall_ms(steps["nn.ELU"], x, target, 2)))
    for s in steps.values():  # one untimed round each: allocator, cuDNN and caches settled
        wall_ms(s, x, target, k)
    times = {e: [] for e in steps}
    for _ in range(rounds):
        for e, s in steps.items():
            times[e].append(wall_ms(s, x, target, k))
    dtype = "bfloat16 autocast" if autocast else "float32"
    rows = []
    for e, s in steps.items():
        t = np.asarray(times[e])
        ms = float(np.median(t))
        rows.append({"model": model.name, "dtype": dtype, "mode": mode, "compiled": compiled, "elu": e, "ms": ms,
                     "noise_ms": float(np.quantile(t, 0.9) - np.quantile(t, 0.1)), "ms_runs": t.tolist(),
                     "steps_per_run": k, "elu_ms": elu_device_ms(s, x, target)})
    return rows


def measure_end_to_end(models=MODELS, compiled=(False, True), rounds: int = ROUNDS, progress=None) -> list[dict]:
    """end_to_end: every model x mode x dtype x (eager, compiled) x (nn.ELU, drop-in)."""
    torch.backends.cuda.matmul.allow_tf32 = True  # float32 matmuls in TF32, as models are trained
    torch.backends.cudnn.allow_tf32 = True
    configs = [(m, mode, a, c) for m in models for c in compiled for a in (False, True) for mode in ("train", "infer")]
    rows = []
    for m, mode, a, c in (progress(configs) if progress else configs):
        rows += config_rows(m, mode, a, c, rounds)
        torch._dynamo.reset()
    return rows
