"""The model job's measurement (GPU): every entry checked, then all timed together.

``run`` is the job in steps: inputs with specials planted; the kernels' forward and backward and autograd
through the op; a CUDA graph of the op's forward and backward; the fusion lesson under torch.compile (F.elu,
the drop-in's fusing route, the opaque op); the MLP with nn.ELU against swap_elu, eager and compiled (both
routes); training steps of both, in float32 and under bfloat16 autocast; the drop-in's checks (dropin.py:
double backward for every step, the dtype/device routing); then the timings, and the host's cost per call
(host.py). ``device``
and ``backend`` (torch.compile's) allow a dry run of this logic on the CPU with a stand-in module
(tests/test_library.py), which replaces build, hardware and timing functions: they are called through
their modules here.
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch._dynamo.utils import counters
from tqdm import tqdm  # text bars: tqdm.auto warns on stderr in a notebook without ipywidgets

from elu_study.core import build, hardware, timing
from elu_study.core.check import ATOL, RTOL
from elu_study.core.entries import STEPS
from elu_study.jobs.model import dropin, host
from elu_study.pytorch import library
from elu_study.pytorch.nn import swap_elu

DEFAULT_VARIANTS = ("2_float4", "5_streaming")
ALPHA = 1.0
FUSION_SCALE, FUSION_SHIFT = 2.0, 1.0  # F.elu(x) * 2 + 1
MLP = {"d_in": 1024, "width": 1024, "depth": 4, "d_out": 1024, "batch": 65536, "alpha": 1.0}
TRAIN_STEPS, LR, OPTIMIZER = 30, 1e-3, "Adam"
TRAIN_TARGET = "a fixed random linear map of the input (learnable)"
THREE_STREAMS = "torch.add (3 streams)"  # the measured three-stream reference
GRAPH_EAGER, GRAPH_REPLAY = "op fwd+bwd eager", "op fwd+bwd CUDA graph"
# The fusion lesson's routes: compiled with F.elu, with the drop-in (its compile-time route), with the op.
FUSED_FELU, FUSED_DROPIN, FUSED_OP = "compiled F.elu*2+1", "compiled drop-in*2+1", "compiled op*2+1"
MLP_OPAQUE = "MLP elu_study.ELU compiled, opaque op"
AUTOCAST_STEPS = 10


# ---------------------------------------------------------------- helpers


def max_abs(a, b) -> float:
    """Largest |a - b|; equal values (infinities, NaN against NaN) count as 0, a NaN against a number as inf."""
    if not a.numel():
        return 0.0
    d = (a - b).abs()
    same = (a == b) | (torch.isnan(a) & torch.isnan(b))
    return float(torch.nan_to_num(d.masked_fill_(same, 0.0), nan=float("inf")).max().item())


def poisoned_like(t):
    return torch.empty(t.shape, dtype=torch.int32, device=t.device).fill_(0x7FA5A5A5).view(torch.float32)


def require(ok: bool, what: str) -> None:
    if not ok:
        raise AssertionError(f"correctness check failed: {what}")


def close(got, want) -> bool:
    return bool(torch.isclose(got, want, rtol=RTOL, atol=ATOL).all())


def captured(fn, device):
    """``fn`` (returning a tuple of tensors) captured in a CUDA graph: (replay, its static outputs).

    fn runs once eagerly first (kernels built, caches warm). On the CPU (a dry run of this logic) there
    is no graph: replay runs fn again and copies its results into the first run's outputs."""
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
    layers = [nn.Linear(d_in, width), nn.ELU(alpha)]
    for _ in range(depth - 1):
        layers += [nn.Linear(width, width), nn.ELU(alpha)]
    layers.append(nn.Linear(width, d_out))
    return nn.Sequential(*layers)


def eager_fused(t):
    """The fusion lesson's chain: ``F.elu(t) * 2 + 1``."""
    return F.elu(t, ALPHA) * FUSION_SCALE + FUSION_SHIFT


def op_fused(op: str, strict: bool):
    """The same chain with the drop-in (``library.elu``, ``op``'s kernel) in place of F.elu: its fusing route
    under torch.compile, or with ``strict`` the custom op, opaque to Inductor."""
    def chain(t):
        return library.elu(t, ALPHA, op, strict=strict) * FUSION_SCALE + FUSION_SHIFT
    return chain


def fwd_bwd(model, xb, target):
    """One forward + backward of ``model`` on the MSE against ``target``, gradients reset first."""
    def step():
        for p in model.parameters():
            p.grad = None
        F.mse_loss(model(xb), target).backward()
    return step


# ---------------------------------------------------------------- the steps


def inputs(shape, dev, gen):
    """x: randn * 4 (half the elements on the exp branch) with specials planted at both ends; g: a gradient."""
    x = torch.randn(shape, device=dev, generator=gen).mul_(4)
    g = torch.randn(shape, device=dev, generator=gen)
    flat = x.view(-1)
    flat[:6] = torch.tensor([0.0, -0.0, -1e-30, 1e-30, -88.0, -104.0], device=dev)
    flat[-3:] = torch.tensor([3.0e38, -3.0e38, -1e-7], device=dev)
    return x, g


def check_kernels(modules: dict, x, g, checks: dict) -> None:
    """Each variant's forward and backward at full shape into poisoned outputs, then through the op."""
    ref_y = F.elu(x, ALPHA)
    ref_g = torch.ops.aten.elu_backward(g, ALPHA, 1, 1, False, x)
    for v, m in modules.items():
        y = m.elu(x, ALPHA, out=poisoned_like(x))
        err = max_abs(y, ref_y)
        require(close(y, ref_y), f"{v} forward, max abs err {err:g}")
        gx = m.elu_backward(g, x, ALPHA, out=poisoned_like(x))
        gerr = max_abs(gx, ref_g)
        require(close(gx, ref_g), f"{v} backward, max abs err {gerr:g}")
        require(torch.equal(library.elu(x, ALPHA, v), y), f"{v}: the op differs from the module")
        checks[v] = {"forward_max_abs_err_vs_felu": err, "backward_max_abs_err_vs_aten": gerr}
        del y, gx


def check_autograd(op: str, dev, gen, checks: dict) -> None:
    """Autograd through the op equals autograd of F.elu (small)."""
    xs = (torch.randn(4099, device=dev, generator=gen) * 4).requires_grad_()
    gs = torch.randn(4099, device=dev, generator=gen)
    (want,) = torch.autograd.grad(F.elu(xs, 0.7), xs, gs)
    (got,) = torch.autograd.grad(library.elu(xs, 0.7, op), xs, gs)
    require(close(got, want), "autograd through the op")
    checks["autograd_max_abs_err"] = max_abs(got, want)


def check_graph(x, g, op: str, dev, checks: dict):
    """The op's forward and backward captured at full shape, replayed into poisoned outputs, equal to eager.
    Returns (the eager call, the replay)."""
    def op_fwd_bwd():
        return library.elu(x, ALPHA, op), library.elu_backward(g, x, ALPHA, False, op)

    replay, graph_outs = captured(op_fwd_bwd, dev)
    for t in graph_outs:
        t.fill_(float("nan"))
    replay()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    eager_outs = op_fwd_bwd()
    equal = [bool(torch.equal(a, b)) for a, b in zip(graph_outs, eager_outs)]
    require(all(equal), f"CUDA graph replay differs from eager (forward equal: {equal[0]}, backward equal: {equal[1]})")
    checks["cuda_graph"] = {"captured_in_a_cuda_graph": dev.type == "cuda", "replay_equals_eager_forward": equal[0],
                            "replay_equals_eager_backward": equal[1]}
    return op_fwd_bwd, replay


def check_fusion(x, op: str, backend: str, checks: dict) -> dict:
    """``elu(x) * 2 + 1`` compiled with F.elu, with the drop-in (fusing route) and with the op (opaque),
    checked against eager. Returns name -> the compiled function."""
    torch._dynamo.reset()
    compiled = {FUSED_FELU: torch.compile(eager_fused, fullgraph=True, backend=backend),
                FUSED_DROPIN: torch.compile(op_fused(op, strict=False), fullgraph=True, backend=backend),
                FUSED_OP: torch.compile(op_fused(op, strict=True), fullgraph=True, backend=backend)}
    ref_f = eager_fused(x)
    for name, fn in compiled.items():
        got_f = fn(x)
        err = max_abs(got_f, ref_f)
        require(close(got_f, ref_f), f"{name}: max abs err {err:g}")
        checks[name] = {"max_abs_err_vs_eager": err}
        del got_f
    return compiled


def mlp_problem(mlp: dict, dev, gen):
    """A batch and a learnable target (a fixed random linear map of it): the losses must move for their
    agreement to mean something."""
    xb = torch.randn(mlp["batch"], mlp["d_in"], device=dev, generator=gen)
    teacher = torch.randn(mlp["d_in"], mlp["d_out"], device=dev, generator=gen) / math.sqrt(mlp["d_in"])
    return xb, xb @ teacher


def check_mlp(base, ours, xb, target, backend: str, checks: dict, op: str):
    """nn.ELU against swap_elu, same weights: outputs and gradients, eager and compiled (no graph breaks;
    the drop-in's fusing route and, strict, the opaque op). Returns the three compiled models."""
    for m in (base, ours):
        fwd_bwd(m, xb, target)()
    grads_err = max(max_abs(a.grad, b.grad) / max(float(a.grad.abs().max()), 1e-30)
                    for a, b in zip(base.parameters(), ours.parameters()))
    out_err = max_abs(base(xb), ours(xb))
    require(grads_err < 1e-3 and out_err < 1e-3, f"MLP: output err {out_err:g}, worst relative grad err {grads_err:g}")
    checks["mlp"] = {"output_max_abs_err": out_err, "grad_max_rel_err": grads_err}
    counters.clear()  # (no dynamo reset: the fusion functions stay compiled for the timings)
    opaque = swap_elu(copy.deepcopy(base), variant=op, strict=True)
    compiled = [torch.compile(m, fullgraph=True, backend=backend) for m in (base, ours, opaque)]
    for m in compiled:
        fwd_bwd(m, xb, target)()
    checks["mlp_compiled"] = {"graph_breaks": int(sum(counters["graph_break"].values())),
                              "output_max_abs_err": max_abs(compiled[0](xb), compiled[1](xb)),
                              "opaque_output_max_abs_err": max_abs(compiled[0](xb), compiled[2](xb))}
    require(max(checks["mlp_compiled"]["output_max_abs_err"], checks["mlp_compiled"]["opaque_output_max_abs_err"])
            < 1e-3, "compiled MLP output")
    return compiled


def train(models: dict, xb, target) -> dict:
    """TRAIN_STEPS Adam steps of a copy of each model from the same weights: name -> its losses."""
    losses = {}
    for name, model in models.items():
        model_t = copy.deepcopy(model)
        opt = torch.optim.Adam(model_t.parameters(), lr=LR)
        trace = []
        for _ in range(TRAIN_STEPS):
            opt.zero_grad(set_to_none=True)
            loss = F.mse_loss(model_t(xb), target)
            loss.backward()
            opt.step()
            trace.append(float(loss.item()))
        losses[name] = trace
        del model_t, opt
    return losses


def kernel_calls(x, g, variants: list[str]) -> dict:
    """The forward and backward entries: name -> (group, what, call)."""
    y_copy, c_add = torch.empty_like(x), torch.empty_like(x)
    return {
        "copy_": ("forward", "y.copy_(x): the roof, two streams", lambda: y_copy.copy_(x)),
        "F.elu": ("forward", "PyTorch's ELU", lambda: F.elu(x, ALPHA)),
        **{f"op {v}": ("forward", f"library.elu (eager: the binding), {v}'s kernel", (lambda v=v: library.elu(x, ALPHA, v)))
           for v in variants},
        "aten.elu_backward": ("backward", "PyTorch's ELU backward (what autograd of F.elu runs)",
                              lambda: torch.ops.aten.elu_backward(g, ALPHA, 1, 1, False, x)),
        THREE_STREAMS: ("backward", "torch.add(x, g, out=c): two reads, one write, the backward's traffic",
                        lambda: torch.add(x, g, out=c_add)),
        **{f"op backward {v}": ("backward", f"library.elu_backward (eager: the binding), {v}'s build",
                                (lambda v=v: library.elu_backward(g, x, ALPHA, False, v))) for v in variants},
    }


def use_calls(x, op: str, fusion: dict, graph: tuple, mlps: dict) -> dict:
    """The fusion, CUDA graph and MLP entries: name -> (group, what, call)."""
    op_fwd_bwd, replay = graph
    return {
        "eager F.elu*2+1": ("fusion", "eager: three kernels, six streams", lambda: eager_fused(x)),
        FUSED_FELU: ("fusion", "torch.compile with F.elu: one fused kernel", lambda: fusion[FUSED_FELU](x)),
        FUSED_DROPIN: ("fusion", f"torch.compile with the drop-in library.elu ({op}): its fusing route, F.elu "
                       "while compiling", lambda: fusion[FUSED_DROPIN](x)),
        FUSED_OP: ("fusion", f"torch.compile with the custom op ({op}; strict=True), then a fused *2+1",
                   lambda: fusion[FUSED_OP](x)),
        GRAPH_EAGER: ("graph", f"library.elu and library.elu_backward ({op}), launched eagerly", op_fwd_bwd),
        GRAPH_REPLAY: ("graph", f"the same two calls ({op}) captured in one torch.cuda.CUDAGraph, replayed", replay),
        "MLP nn.ELU eager": ("model", "forward + backward, nn.ELU", mlps["base"]),
        "MLP elu_study.ELU eager": ("model", f"forward + backward, swap_elu(variant={op!r})", mlps["ours"]),
        "MLP nn.ELU compiled": ("model", "torch.compile(fullgraph=True), nn.ELU", mlps["base_c"]),
        "MLP elu_study.ELU compiled": ("model", f"torch.compile(fullgraph=True), swap_elu(variant={op!r}): "
                                       "the fusing route", mlps["ours_c"]),
        MLP_OPAQUE: ("model", f"torch.compile(fullgraph=True), swap_elu(variant={op!r}, strict=True): the opaque op",
                     mlps["opaque_c"]),
    }


def step_variants() -> list[str]:
    """Every step's kernel file (once each): the double-backward check runs on all of them."""
    return list(dict.fromkeys(e.variant for e in STEPS))


def check_model(mlp: dict, op: str, dev, gen, backend: str, checks: dict) -> dict:
    """The MLP: nn.ELU against swap_elu (eager, compiled both routes), trained in float32 and under bfloat16
    autocast. Returns its models, compiled models, losses, autocast record and its data."""
    torch.manual_seed(0)
    base = make_mlp(**mlp).to(dev)
    ours = swap_elu(copy.deepcopy(base), variant=op)
    xb, target = mlp_problem(mlp, dev, gen)
    base_c, ours_c, opaque_c = check_mlp(base, ours, xb, target, backend, checks, op)
    losses = train({"nn.ELU": base, "elu_study.ELU": ours}, xb, target)
    autocast = dropin.autocast_training(base, xb, target, op, AUTOCAST_STEPS, LR)
    models = {"base": base, "ours": ours, "base_c": base_c, "ours_c": ours_c, "opaque_c": opaque_c}
    return {"models": models, "losses": losses, "autocast": autocast, "xb": xb, "target": target,
            "params": sum(p.numel() for p in base.parameters())}


def check_dropin(op: str, dev, double_variants, double_n: int) -> dict:
    """Double backward of every step and gradgradcheck in float64; who computes each dtype and device.
    Recorded, not required: nothing here is timed, and the notebook grades them (tests/ assert them)."""
    double = dropin.check_double_backward(double_variants, dev, double_n)
    routes = dropin.routing_table(op, dev)
    for c in routes["cases"]:
        c["passed"] = c["forward"]["max_abs_err"] <= ATOL and c["backward"]["max_abs_err"] <= ATOL
    return {"double_backward": double, "routing": routes}


def run(variants=DEFAULT_VARIANTS, shape=None, rounds: int = 3, mlp: dict | None = None, progress: bool = True,
        device: str = "cuda", backend: str = "inductor", host_options: dict | None = None,
        double_variants=None, double_n: int = dropin.DOUBLE_N) -> dict:
    """Check, then time, everything the record holds (see the module's docstring)."""
    shape, variants, dev = tuple(shape or hardware.SHAPE), list(variants), torch.device(device)
    mlp, op, checks = {**MLP, **(mlp or {})}, variants[0], {}
    double_variants = list(double_variants or step_variants())
    build.build_all([(v, ()) for v in dict.fromkeys(variants + double_variants + [library.DEFAULT_VARIANT16])])
    modules = {v: build.compile_variant(v) for v in variants}
    steps = tqdm(total=8, desc="checks and compiles", unit="part", disable=not progress)
    gen = torch.Generator(device=dev).manual_seed(0)
    x, g = inputs(shape, dev, gen)
    check_kernels(modules, x, g, checks)
    check_autograd(op, dev, gen, checks)
    graph = check_graph(x, g, op, dev, checks)
    fusion = check_fusion(x, op, backend, checks)
    steps.update(3)
    dropin_record = check_dropin(op, dev, double_variants, double_n)
    steps.update()
    precision = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")  # TF32 matmuls, as a model would run: the ELU's share shows
    model = check_model(mlp, op, dev, gen, backend, checks)
    steps.update(2)
    mlps = {k: fwd_bwd(m, model["xb"], model["target"]) for k, m in model["models"].items()}
    calls = {**kernel_calls(x, g, variants), **use_calls(x, op, fusion, graph, mlps)}
    steps.update()
    timings = timing.time_interleaved({k: e[2] for k, e in calls.items()}, rounds=rounds, progress=progress)
    torch.set_float32_matmul_precision(precision)
    entries = {k: {"group": e[0], "what": e[1]} for k, e in calls.items()}
    del x, g, graph, fusion, mlps, calls  # the full-shape tensors: the host's timings need none
    host_record = {**host.measure_host(op, ALPHA, dev, **(host_options or {})),
                   "profile": host.profile_routes(op, ALPHA, dev)}
    steps.update()
    steps.close()
    return {
        "provenance": hardware.provenance(),
        "shape": list(shape),
        "alpha": ALPHA,
        "variants": variants,
        "fusion": {"scale": FUSION_SCALE, "shift": FUSION_SHIFT},
        "mlp": {**mlp, "params": model["params"], "matmul_precision": "high (TF32)",
                "swap_elu_variant": op, "train_steps": TRAIN_STEPS, "optimizer": OPTIMIZER, "lr": LR,
                "target": TRAIN_TARGET},
        "compile_backend": backend,
        "checks": checks,
        "losses": model["losses"],
        "entries": entries,
        "timings": timings,
        **dropin_record,
        "autocast": model["autocast"],
        "host": host_record,
    }
