"""The kernel in a model (GPU): ``python -m elu_study model`` writes results/<gpu>-model.json and its figure.

What it measures, at the study's shape (4096, 393216) float32 unless said otherwise, every entry checked
before it is timed, all timed together in interleaved do_bench rounds (elu_study.timing):

- forward: ``torch.ops.elu_study.elu`` (the custom op, variants 2_float4 and 5_streaming) against
  ``F.elu`` and ``y.copy_(x)`` (the roof: two streams);
- backward: ``torch.ops.elu_study.elu_backward`` (kernels/common/backward.cu) against
  ``aten.elu_backward`` and a measured three-stream reference, ``torch.add(x, g, out=c)`` (two reads,
  one write: the backward's traffic); 1.5x copy_'s time is only an estimate of that;
- CUDA graphs: the op's forward and backward (the ops, full shape) captured in one
  ``torch.cuda.CUDAGraph``, replayed into NaN-poisoned outputs and checked equal to eager, then timed
  against the same two ops run eagerly;
- the fusion lesson: ``F.elu(x) * 2 + 1`` eager (three kernels), under torch.compile with F.elu (one
  fused kernel, two streams) and under torch.compile with the custom op (the op, then a fused
  ``* 2 + 1``: four streams);
- a small model: an MLP with nn.ELU against the same MLP through ``swap_elu``, forward + backward,
  eager and ``torch.compile(fullgraph=True)``; and TRAIN_STEPS Adam steps of each from the same weights
  towards a learnable target (a fixed random linear map of the input), so the loss moves.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
from pathlib import Path

from elu_study.core import record as results
from elu_study.core.record import dumps

DEFAULT_VARIANTS = ("2_float4", "5_streaming")
ALPHA = 1.0
FUSION_SCALE, FUSION_SHIFT = 2.0, 1.0  # F.elu(x) * 2 + 1
MLP = {"d_in": 1024, "width": 1024, "depth": 4, "d_out": 1024, "batch": 65536, "alpha": 1.0}
TRAIN_STEPS, LR, OPTIMIZER = 30, 1e-3, "Adam"
TRAIN_TARGET = "a fixed random linear map of the input (learnable)"
BACKWARD_STREAMS = 1.5  # grad + x read, grad_in written: 3 streams against copy_'s 2 (an estimate)
THREE_STREAMS = "torch.add (3 streams)"  # the measured three-stream reference
GRAPH_EAGER, GRAPH_REPLAY = "op fwd+bwd eager", "op fwd+bwd CUDA graph"
ELU_STREAMS_PER_LAYER = 5  # forward: read x, write y; backward: read grad and x, write grad_in


def record_path(gpu_name_or_slug: str) -> Path:
    return results.record_path(gpu_name_or_slug, "model")


def figure_path(gpu_name_or_slug: str) -> Path:
    return record_path(gpu_name_or_slug).with_suffix(".png")


def load(gpu_name_or_slug: str = "nvidia-h200", path: Path | None = None) -> dict:
    """The record; ``ELU_STUDY_MODEL_RECORD`` (a path) overrides it, to try the notebook on another record."""
    import os

    path = path or Path(os.environ.get("ELU_STUDY_MODEL_RECORD") or record_path(gpu_name_or_slug))
    if not path.is_file():
        raise FileNotFoundError(f"no model record at {path}: run `python -m elu_study model` on a GPU")
    return json.loads(path.read_text())


# ---------------------------------------------------------------- what the record says (no GPU needed)


def median(record: dict, name: str) -> float:
    return record["timings"][name]["median_ms"]


def entries(record: dict, group: str) -> list[str]:
    return [name for name, e in record["entries"].items() if e["group"] == group]


def overlap(record: dict, a: str, b: str) -> bool:
    """Whether the p10-p90 ranges of two entries overlap (then no difference is measurable between them)."""
    ta, tb = record["timings"][a], record["timings"][b]
    return ta["p10_ms"] <= tb["p90_ms"] and tb["p10_ms"] <= ta["p90_ms"]


def elu_share(record: dict) -> dict:
    """What ELU should cost inside the MLP step, from bytes alone: every ELU layer moves its activations
    five times (forward: read, write; backward: read grad and x, write grad_in), at copy_'s bandwidth."""
    m = record["mlp"]
    copy_bytes = 2 * 4 * math.prod(record["shape"])
    bandwidth = copy_bytes / (median(record, "copy_") * 1e-3)  # bytes/s
    elu_bytes = ELU_STREAMS_PER_LAYER * 4 * m["depth"] * m["batch"] * m["width"]
    elu_ms = elu_bytes / bandwidth * 1e3
    step_ms = median(record, "MLP nn.ELU eager")
    return {"bandwidth_tb_s": bandwidth / 1e12, "elu_bytes": elu_bytes, "elu_ms": elu_ms, "step_ms": step_ms,
            "share": elu_ms / step_ms}


def op_signature(name: str) -> str:
    """``torch.ops.elu_study.<name>``'s arguments and returns, formatted here (not the schema's own text,
    which changes between torch versions)."""
    import torch

    schema = getattr(torch.ops.elu_study, name).default._schema
    args = []
    for a in schema.arguments:
        written = a.alias_info is not None and a.alias_info.is_write
        args.append(f"{a.name}: {a.type}" + (" (written in place)" if written else ""))
    returns = ", ".join(str(r.type) for r in schema.returns) or "None"
    return f"elu_study::{name}({', '.join(args)}) -> {returns}"


def summary(record: dict) -> dict:
    """The ratios the notebook and the closing note quote, all from the record."""
    copy_ms = median(record, "copy_")
    v = record["variants"][0]
    out = {
        "copy_ms": copy_ms,
        "forward_ms": median(record, f"op {v}"),
        "felu_ms": median(record, "F.elu"),
        "backward_ms": median(record, f"op backward {v}"),
        "aten_backward_ms": median(record, "aten.elu_backward"),
        "backward_estimate_ms": BACKWARD_STREAMS * copy_ms,
        "three_streams_ms": median(record, THREE_STREAMS),
        "graph_eager_ms": median(record, GRAPH_EAGER),
        "graph_replay_ms": median(record, GRAPH_REPLAY),
        "eager_fused_ms": median(record, "eager F.elu*2+1"),
        "compiled_felu_ms": median(record, "compiled F.elu*2+1"),
        "compiled_op_ms": median(record, "compiled op*2+1"),
        "mlp_eager_ms": median(record, "MLP nn.ELU eager"),
        "mlp_eager_op_ms": median(record, "MLP elu_study.ELU eager"),
        "mlp_compiled_ms": median(record, "MLP nn.ELU compiled"),
        "mlp_compiled_op_ms": median(record, "MLP elu_study.ELU compiled"),
    }
    out["forward_x_felu"] = out["forward_ms"] / out["felu_ms"]
    out["backward_x_aten"] = out["backward_ms"] / out["aten_backward_ms"]
    out["backward_x_three_streams"] = out["backward_ms"] / out["three_streams_ms"]
    out["aten_backward_x_three_streams"] = out["aten_backward_ms"] / out["three_streams_ms"]
    out["backward_x_estimate"] = out["backward_ms"] / out["backward_estimate_ms"]
    out["graph_x_eager"] = out["graph_replay_ms"] / out["graph_eager_ms"]
    out["compiled_op_x_compiled_felu"] = out["compiled_op_ms"] / out["compiled_felu_ms"]
    out["mlp_compiled_op_x_compiled"] = out["mlp_compiled_op_ms"] / out["mlp_compiled_ms"]
    out["mlp_eager_op_x_eager"] = out["mlp_eager_op_ms"] / out["mlp_eager_ms"]
    return out


def _is_ours(name: str) -> bool:
    return name.startswith("op ") or "op*" in name or "elu_study" in name


COLORS = {"ours, forward": "tab:blue", "ours, backward": "tab:purple", "ours, forward + backward": "tab:cyan",
          "PyTorch / reference": "tab:gray"}


def _color(record: dict, name: str) -> str:
    if not _is_ours(name):
        return COLORS["PyTorch / reference"]
    group = record["entries"][name]["group"]
    if group == "backward":
        return COLORS["ours, backward"]
    return COLORS["ours, forward + backward" if group in ("graph", "model") else "ours, forward"]


def figure(record: dict):
    """Four panels: forward and backward against copy_ and the measured three-stream add, the fusion
    lesson, CUDA graphs, the MLP; p10-p90 whiskers; colours: ours by direction, gray PyTorch."""
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.patches import Patch

    copy_ms = median(record, "copy_")
    panels = [
        ("forward and backward, full shape", entries(record, "forward") + entries(record, "backward"),
         [(copy_ms, "copy_ (2 streams, measured)", "tab:green", "--"),
          (median(record, THREE_STREAMS), "torch.add (3 streams, measured)", "tab:orange", "-."),
          (BACKWARD_STREAMS * copy_ms, "1.5x copy_ (3 streams, estimate)", "tab:red", ":")]),
        ("ELU(x) * 2 + 1, full shape", entries(record, "fusion"),
         [(copy_ms, "copy_ (2 streams)", "tab:green", "--"), (2 * copy_ms, "2x copy_ (4 streams, estimate)", "tab:orange", "-.")]),
        ("op forward + backward: eager vs CUDA graph replay, full shape", entries(record, "graph"), []),
        (f"MLP forward + backward (batch {record['mlp']['batch']})", entries(record, "model"), []),
    ]
    fig, axes = plt.subplots(2, 2, figsize=(15, 8))
    for ax, (title, names, lines) in zip(axes.flat, panels):
        t = [record["timings"][n] for n in names]
        med = np.array([s["median_ms"] for s in t])
        err = np.array([[m - s["p10_ms"] for m, s in zip(med, t)], [s["p90_ms"] - m for m, s in zip(med, t)]])
        y = np.arange(len(names))[::-1]
        ax.barh(y, med, xerr=err, color=[_color(record, n) for n in names], capsize=3)
        ax.set_yticks(y, names, fontsize=8)
        for value, label, color, ls in lines:
            ax.axvline(value, color=color, ls=ls, label=label)
        ax.set_xlabel("time per call, ms (bar: median; whiskers: p10-p90)")
        ax.set_title(title, fontsize=10)
        if lines:
            ax.legend(fontsize=8, loc="lower right")
    fig.legend(handles=[Patch(color=c, label=k) for k, c in COLORS.items()], loc="lower center", ncol=len(COLORS),
               fontsize=9, title="bar colours", title_fontsize=9)
    fig.suptitle(f"{record['provenance']['gpu']}: the custom op in use", fontsize=11)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    plt.close(fig)  # shown once, as the value a cell displays, not again by the inline backend
    return fig


# ---------------------------------------------------------------- the measurement (GPU)


def _max_abs(a, b) -> float:
    """Largest |a - b|; equal values (infinities, NaN against NaN) count as 0, a NaN against a number as inf."""
    import torch

    if not a.numel():
        return 0.0
    d = (a - b).abs()
    same = (a == b) | (torch.isnan(a) & torch.isnan(b))
    return float(torch.nan_to_num(d.masked_fill_(same, 0.0), nan=float("inf")).max().item())


def _poisoned_like(t):
    import torch

    return torch.empty(t.shape, dtype=torch.int32, device=t.device).fill_(0x7FA5A5A5).view(torch.float32)


def _require(ok: bool, what: str) -> None:
    if not ok:
        raise AssertionError(f"correctness check failed: {what}")


def _captured(fn, device):
    """``fn`` (returning a tuple of tensors) captured in a CUDA graph: (replay, its static outputs).

    fn runs once eagerly first (kernels built, caches warm). On the CPU (a dry run of this logic) there
    is no graph: replay runs fn again and copies its results into the first run's outputs."""
    import torch

    outs = fn()
    if device.type != "cuda":
        def replay():
            for o, r in zip(outs, fn()):
                o.copy_(r)
        return replay, outs
    del outs
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = fn()
    torch.cuda.synchronize()
    return graph.replay, outs  # the bound method keeps the graph (and its memory pool) alive


def make_mlp(d_in, width, depth, d_out, alpha, **_):
    from torch import nn

    layers = [nn.Linear(d_in, width), nn.ELU(alpha)]
    for _ in range(depth - 1):
        layers += [nn.Linear(width, width), nn.ELU(alpha)]
    layers.append(nn.Linear(width, d_out))
    return nn.Sequential(*layers)


def measure(variants=DEFAULT_VARIANTS, shape=None, rounds: int = 3, mlp: dict | None = None,
            progress: bool = True, device: str = "cuda", backend: str = "inductor") -> dict:
    """Check, then time, everything the record holds. ``device`` and ``backend`` (torch.compile's) are
    for a dry run of this logic on the CPU with a stand-in module (tests/test_library.py)."""
    import torch
    import torch.nn.functional as F
    from tqdm.auto import tqdm

    from elu_study.pytorch import library
    from elu_study.core.build import build_all, compile_variant
    from elu_study.core.check import ATOL, RTOL
    from elu_study.core.hardware import SHAPE, provenance
    from elu_study.pytorch.nn import swap_elu
    from elu_study.core.timing import time_interleaved

    shape = tuple(shape or SHAPE)
    mlp = {**MLP, **(mlp or {})}
    variants = list(variants)
    dev = torch.device(device)
    checks: dict[str, dict] = {}
    build_all([(v, ()) for v in variants])
    modules = {v: compile_variant(v) for v in variants}
    steps = tqdm(total=6, desc="checks and compiles", unit="part", disable=not progress)

    # -- inputs: randn * 4 (half the elements on the exp branch) with specials planted at both ends
    gen = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(shape, device=dev, generator=gen).mul_(4)
    g = torch.randn(shape, device=dev, generator=gen)
    flat = x.view(-1)
    flat[:6] = torch.tensor([0.0, -0.0, -1e-30, 1e-30, -88.0, -104.0], device=dev)
    flat[-3:] = torch.tensor([3.0e38, -3.0e38, -1e-7], device=dev)

    # -- forward and backward, checked at full shape into poisoned outputs, then through the op
    ref_y = F.elu(x, ALPHA)
    ref_g = torch.ops.aten.elu_backward(g, ALPHA, 1, 1, False, x)
    for v, m in modules.items():
        y = m.elu(x, ALPHA, out=_poisoned_like(x))
        err = _max_abs(y, ref_y)
        _require(bool(torch.isclose(y, ref_y, rtol=RTOL, atol=ATOL).all()), f"{v} forward, max abs err {err:g}")
        gx = m.elu_backward(g, x, ALPHA, out=_poisoned_like(x))
        gerr = _max_abs(gx, ref_g)
        _require(bool(torch.isclose(gx, ref_g, rtol=RTOL, atol=ATOL).all()), f"{v} backward, max abs err {gerr:g}")
        _require(torch.equal(library.elu(x, ALPHA, v), y), f"{v}: the op differs from the module")
        checks[v] = {"forward_max_abs_err_vs_felu": err, "backward_max_abs_err_vs_aten": gerr}
        del y, gx
    del ref_y, ref_g
    # autograd through the op equals autograd of F.elu (small)
    xs = (torch.randn(4099, device=dev, generator=gen) * 4).requires_grad_()
    gs = torch.randn(4099, device=dev, generator=gen)
    (want,) = torch.autograd.grad(F.elu(xs, 0.7), xs, gs)
    (got,) = torch.autograd.grad(library.elu(xs, 0.7, variants[0]), xs, gs)
    _require(bool(torch.isclose(got, want, rtol=RTOL, atol=ATOL).all()), "autograd through the op")
    checks["autograd_max_abs_err"] = _max_abs(got, want)
    steps.update()
    op = variants[0]

    # -- CUDA graphs: the op's forward and backward captured at full shape, replayed into poisoned outputs
    def op_fwd_bwd():
        return library.elu(x, ALPHA, op), library.elu_backward(g, x, ALPHA, False, op)

    replay, graph_outs = _captured(op_fwd_bwd, dev)
    for t in graph_outs:
        t.fill_(float("nan"))
    replay()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    eager_outs = op_fwd_bwd()
    equal = [bool(torch.equal(a, b)) for a, b in zip(graph_outs, eager_outs)]
    _require(all(equal), f"CUDA graph replay differs from eager (forward equal: {equal[0]}, backward equal: {equal[1]})")
    checks["cuda_graph"] = {"captured_in_a_cuda_graph": dev.type == "cuda", "replay_equals_eager_forward": equal[0],
                            "replay_equals_eager_backward": equal[1]}
    del eager_outs
    steps.update()

    # -- the fusion lesson

    def eager_fused(t):
        return F.elu(t, ALPHA) * FUSION_SCALE + FUSION_SHIFT

    def op_fused(t):
        return library.elu(t, ALPHA, op) * FUSION_SCALE + FUSION_SHIFT

    torch._dynamo.reset()
    compiled_felu = torch.compile(eager_fused, fullgraph=True, backend=backend)
    compiled_op = torch.compile(op_fused, fullgraph=True, backend=backend)
    ref_f = eager_fused(x)
    for name, fn in (("compiled F.elu*2+1", compiled_felu), ("compiled op*2+1", compiled_op)):
        got_f = fn(x)
        err = _max_abs(got_f, ref_f)
        _require(bool(torch.isclose(got_f, ref_f, rtol=RTOL, atol=ATOL).all()), f"{name}: max abs err {err:g}")
        checks[name] = {"max_abs_err_vs_eager": err}
        del got_f
    del ref_f
    steps.update()

    # -- the MLP: nn.ELU against swap_elu, same weights; forward + backward, eager and compiled
    precision = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")  # TF32 matmuls, as a model would run: the ELU's share shows
    torch.manual_seed(0)
    base = make_mlp(**mlp).to(dev)
    ours = swap_elu(copy.deepcopy(base), variant=op)
    n_params = sum(p.numel() for p in base.parameters())
    xb = torch.randn(mlp["batch"], mlp["d_in"], device=dev, generator=gen)
    teacher = torch.randn(mlp["d_in"], mlp["d_out"], device=dev, generator=gen) / math.sqrt(mlp["d_in"])
    target = xb @ teacher  # learnable: the losses must move for their agreement to mean something
    del teacher

    def loss_of(model):
        return F.mse_loss(model(xb), target)

    def fwd_bwd(model):
        def run():
            for p in model.parameters():
                p.grad = None
            loss_of(model).backward()
        return run

    for m in (base, ours):
        fwd_bwd(m)()
    grads_err = max(_max_abs(a.grad, b.grad) / max(float(a.grad.abs().max()), 1e-30)
                    for a, b in zip(base.parameters(), ours.parameters()))
    out_err = _max_abs(base(xb), ours(xb))
    _require(grads_err < 1e-3 and out_err < 1e-3, f"MLP: output err {out_err:g}, worst relative grad err {grads_err:g}")
    checks["mlp"] = {"output_max_abs_err": out_err, "grad_max_rel_err": grads_err}
    from torch._dynamo.utils import counters

    counters.clear()  # (no dynamo reset: the fusion functions stay compiled for the timings)
    base_c = torch.compile(base, fullgraph=True, backend=backend)
    ours_c = torch.compile(ours, fullgraph=True, backend=backend)
    fwd_bwd(base_c)()
    fwd_bwd(ours_c)()
    checks["mlp_compiled"] = {"graph_breaks": int(sum(counters["graph_break"].values())),
                              "output_max_abs_err": _max_abs(base_c(xb), ours_c(xb))}
    _require(checks["mlp_compiled"]["output_max_abs_err"] < 1e-3, "compiled MLP output")
    steps.update()

    # -- training steps from the same weights towards a learnable target: the losses track
    losses = {}
    for name, model in (("nn.ELU", base), ("elu_study.ELU", ours)):
        model_t = copy.deepcopy(model)
        opt = torch.optim.Adam(model_t.parameters(), lr=LR)
        trace = []
        for _ in range(TRAIN_STEPS):
            opt.zero_grad(set_to_none=True)
            loss = loss_of(model_t)
            loss.backward()
            opt.step()
            trace.append(float(loss.item()))
        losses[name] = trace
        del model_t, opt
    steps.update()

    # -- the timings, all interleaved
    y_copy, c_add = torch.empty_like(x), torch.empty_like(x)
    calls = {
        "copy_": ("forward", "y.copy_(x): the roof, two streams", lambda: y_copy.copy_(x)),
        "F.elu": ("forward", "PyTorch's ELU", lambda: F.elu(x, ALPHA)),
        **{f"op {v}": ("forward", f"torch.ops.elu_study.elu, {v}'s kernel", (lambda v=v: library.elu(x, ALPHA, v)))
           for v in variants},
        "aten.elu_backward": ("backward", "PyTorch's ELU backward (what autograd of F.elu runs)",
                              lambda: torch.ops.aten.elu_backward(g, ALPHA, 1, 1, False, x)),
        THREE_STREAMS: ("backward", "torch.add(x, g, out=c): two reads, one write, the backward's traffic",
                        lambda: torch.add(x, g, out=c_add)),
        **{f"op backward {v}": ("backward", f"torch.ops.elu_study.elu_backward, {v}'s build",
                                (lambda v=v: library.elu_backward(g, x, ALPHA, False, v))) for v in variants},
        "eager F.elu*2+1": ("fusion", "eager: three kernels, six streams", lambda: eager_fused(x)),
        "compiled F.elu*2+1": ("fusion", "torch.compile with F.elu: one fused kernel", lambda: compiled_felu(x)),
        "compiled op*2+1": ("fusion", f"torch.compile with the custom op ({op}), then a fused *2+1",
                            lambda: compiled_op(x)),
        GRAPH_EAGER: ("graph", f"the ops elu and elu_backward ({op}), launched eagerly", op_fwd_bwd),
        GRAPH_REPLAY: ("graph", f"the same two ops ({op}) captured in one torch.cuda.CUDAGraph, replayed", replay),
        "MLP nn.ELU eager": ("model", "forward + backward, nn.ELU", fwd_bwd(base)),
        "MLP elu_study.ELU eager": ("model", f"forward + backward, swap_elu(variant={op!r})", fwd_bwd(ours)),
        "MLP nn.ELU compiled": ("model", "torch.compile(fullgraph=True), nn.ELU", fwd_bwd(base_c)),
        "MLP elu_study.ELU compiled": ("model", f"torch.compile(fullgraph=True), swap_elu(variant={op!r})",
                                       fwd_bwd(ours_c)),
    }
    steps.update()
    steps.close()
    timings = time_interleaved({k: e[2] for k, e in calls.items()}, rounds=rounds, progress=progress)
    torch.set_float32_matmul_precision(precision)
    return {
        "schema": 2,
        "provenance": provenance(),
        "shape": list(shape),
        "alpha": ALPHA,
        "variants": variants,
        "fusion": {"scale": FUSION_SCALE, "shift": FUSION_SHIFT},
        "mlp": {**mlp, "params": n_params, "matmul_precision": "high (TF32)", "swap_elu_variant": op,
                "train_steps": TRAIN_STEPS, "optimizer": OPTIMIZER, "lr": LR, "target": TRAIN_TARGET},
        "compile_backend": backend,
        "checks": checks,
        "losses": losses,
        "entries": {k: {"group": e[0], "what": e[1]} for k, e in calls.items()},
        "timings": timings,
    }


def describe(record: dict) -> str:
    s = summary(record)
    v = record["variants"][0]
    lines = [f"{name:<28} {t['median_ms']:8.3f} ms  (p10 {t['p10_ms']:.3f}, p90 {t['p90_ms']:.3f}; {t['runs']} runs)"
             for name, t in record["timings"].items()]
    lines += [
        "",
        f"forward  op {v}: {s['forward_ms']:.3f} ms = {s['forward_x_felu']:.3f}x F.elu ({s['felu_ms']:.3f} ms)",
        f"backward op {v}: {s['backward_ms']:.3f} ms = {s['backward_x_aten']:.3f}x aten.elu_backward "
        f"({s['aten_backward_ms']:.3f} ms), {s['backward_x_three_streams']:.3f}x torch.add's three streams "
        f"({s['three_streams_ms']:.3f} ms; aten: {s['aten_backward_x_three_streams']:.3f}x); "
        f"1.5x copy_ (an estimate) would be {s['backward_estimate_ms']:.3f} ms",
        f"CUDA graph: op fwd+bwd replayed {s['graph_replay_ms']:.3f} ms vs eager {s['graph_eager_ms']:.3f} ms "
        f"({s['graph_x_eager']:.3f}x); replay equal to eager: {record['checks']['cuda_graph']}",
        f"fusion: eager {s['eager_fused_ms']:.3f} ms, compiled F.elu {s['compiled_felu_ms']:.3f} ms, "
        f"compiled op {s['compiled_op_ms']:.3f} ms ({s['compiled_op_x_compiled_felu']:.2f}x)",
        f"MLP fwd+bwd: eager {s['mlp_eager_ms']:.3f} vs {s['mlp_eager_op_ms']:.3f} ms; compiled {s['mlp_compiled_ms']:.3f} "
        f"vs {s['mlp_compiled_op_ms']:.3f} ms (graph breaks: {record['checks']['mlp_compiled']['graph_breaks']})",
        "losses nn.ELU       : " + " ".join(f"{v:.5f}" for v in record["losses"]["nn.ELU"]),
        "losses elu_study.ELU: " + " ".join(f"{v:.5f}" for v in record["losses"]["elu_study.ELU"]),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elu_study model", description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default=",".join(DEFAULT_VARIANTS), help="comma-separated; the first is the op's")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds")
    parser.add_argument("--no-record", action="store_true", help="print only; write nothing under results/")
    args = parser.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        print("elu-study model: needs a CUDA GPU (the recorded run is results/nvidia-h200-model.json; "
              "notebooks/11_in_a_model.ipynb shows it)", file=sys.stderr)
        return 2
    record = measure([v.strip() for v in args.variants.split(",") if v.strip()], rounds=args.rounds)
    print(describe(record))
    if not args.no_record:
        from elu_study.jobs.study.figures import save

        path = record_path(record["provenance"]["gpu"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dumps(record) + "\n")
        fig_path = save(figure(record), figure_path(record["provenance"]["gpu"]))
        print(f"\nwrote {path} and {fig_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
