"""The drop-in's checks (GPU; a dry run on the CPU with a stand-in): second derivatives for every step, who
computes each dtype and device (and that the results are PyTorch's), and a bfloat16 autocast model trained
with ``swap_elu`` against ``nn.ELU``.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

from elu_study.core.check import ATOL, RTOL
from elu_study.pytorch import library, routing
from elu_study.pytorch.nn import ELU, swap_elu

ALPHAS = (1.0, 0.5, 0.0, -0.7, 2.5)
SPECIALS = (0.0, -0.0, 1e-30, -1e-30, 1e-45, -1e-7, -88.0, -104.0, -1e30, 3e38, -3e38, 1.0, -1.0, float("nan"))
DOUBLE_N = 1 << 16
AUTOCAST_DTYPE = torch.bfloat16
# (device kind, dtype): "kernel" is the device the kernels run on (cuda), "cpu" the host.
ROUTING_CASES = (("kernel", torch.float32), ("kernel", torch.bfloat16), ("kernel", torch.float16),
                 ("kernel", torch.float64), ("cpu", torch.float32), ("cpu", torch.float64), ("cpu", torch.bfloat16))


def special_inputs(n: int, device, dtype=torch.float32, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    x = torch.cat([torch.tensor(SPECIALS, dtype=torch.float64), torch.randn(n, generator=gen, dtype=torch.float64) * 4])
    return x.to(dtype=dtype, device=device)


def compare(got: torch.Tensor, want: torch.Tensor) -> dict:
    """Bit for bit (NaN equal to NaN), and the largest |difference| where they differ (inf for a NaN mismatch)."""
    got, want = got.detach(), want.detach()
    same = (got == want) | (torch.isnan(got) & torch.isnan(want))
    diff = (got.double() - want.double()).abs().masked_fill(same, 0.0)
    return {"bit_identical": bool(same.all()), "max_abs_err": float(torch.nan_to_num(diff, nan=float("inf")).max())}


def second_derivatives(fn, x, g, gg):
    """(grad_x, d/dx, d/dg) of <gg, grad_x <g, fn(x)>>."""
    x = x.detach().clone().requires_grad_()
    g = g.detach().clone().requires_grad_()
    (gx,) = torch.autograd.grad(fn(x), x, g, create_graph=True)
    return (gx.detach(), *torch.autograd.grad(gx, (x, g), gg))


def double_backward_of(variant: str, device, alphas=ALPHAS, n: int = DOUBLE_N) -> dict:
    """One step's gradients and second derivatives against F.elu's, float32, random and special inputs."""
    x = special_inputs(n, device)
    g, gg = (special_inputs(n, device, seed=s).nan_to_num(0.0) for s in (1, 2))
    worst = {"grad": 0.0, "d_x": 0.0, "d_grad": 0.0}
    identical, passed = True, True
    for alpha in alphas:
        want = second_derivatives(lambda t: F.elu(t, alpha), x, g, gg)
        for fn in (lambda t: library.elu(t, alpha, variant), lambda t: torch.ops.elu_study.elu(t, alpha, variant, False)):
            for key, got, expected in zip(worst, second_derivatives(fn, x, g, gg), want):
                c = compare(got, expected)
                worst[key] = max(worst[key], c["max_abs_err"])
                identical &= c["bit_identical"]
                passed &= bool(torch.isclose(got, expected, rtol=RTOL, atol=ATOL, equal_nan=True).all())
    return {"max_abs_err": worst, "bit_identical": identical, "passed": passed}


def gradgradcheck_float64(device, alphas=ALPHAS) -> dict:
    """gradgradcheck of the ops in float64 (which they hand to PyTorch: the autograd formulas are tested)."""
    gen = torch.Generator().manual_seed(1)
    out = {}
    for alpha in alphas:
        x = torch.randn(48, generator=gen, dtype=torch.float64) * 3
        x = torch.where(x.abs() < 0.05, x + 0.2, x).to(device).requires_grad_()
        g = torch.randn(48, generator=gen, dtype=torch.float64).to(device).requires_grad_()
        ok = torch.autograd.gradgradcheck(lambda t: torch.ops.elu_study.elu(t, alpha, library.DEFAULT_VARIANT, False), (x,),
                                          raise_exception=False)
        ok &= torch.autograd.gradgradcheck(
            lambda a, b: torch.ops.elu_study.elu_backward(a, b, alpha, False, library.DEFAULT_VARIANT), (g, x),
            raise_exception=False)
        out[str(alpha)] = bool(ok)
    return {"alphas": list(alphas), "passed": out, "all_passed": all(out.values())}


def check_double_backward(variants, device, n: int = DOUBLE_N) -> dict:
    """Every step's double backward against F.elu's, and gradgradcheck in float64."""
    return {"alphas": list(ALPHAS), "n": n + len(SPECIALS), "specials": [str(v) for v in SPECIALS],
            "steps": {v: double_backward_of(v, device, n=n) for v in variants},
            "gradgradcheck_float64": gradgradcheck_float64(device)}


def strict_outcome(x, op: str) -> str:
    try:
        library.elu(x, 1.0, op, strict=True)
    except (TypeError, ValueError) as err:
        return f"{type(err).__name__}: {err}"
    return "the kernel"


def routing_case(kind: str, dtype, op: str, device, calls: list) -> dict:
    """One (device, dtype): who computes it, and the forward and backward against F.elu's."""
    dev = device if kind == "kernel" else torch.device("cpu")
    x = special_inputs(4096, dev, dtype)
    g = special_inputs(4096, dev, dtype, seed=1)
    calls.clear()
    y = ELU(1.0, variant=op)(x)
    xr, xf = x.clone().requires_grad_(), x.clone().requires_grad_()
    library.elu(xr, 1.0, op).backward(g)
    F.elu(xf, 1.0).backward(g)
    return {"device": str(dev), "dtype": str(dtype).removeprefix("torch."), "route": routing.route_name(x, 1.0, op),
            "builds_run": sorted(set(calls)), "forward": compare(y, F.elu(x, 1.0)),
            "backward": compare(xr.grad, xf.grad), "strict": strict_outcome(x, op)}


def routing_table(op: str, device) -> dict:
    """Every ROUTING_CASES case through elu_study.ELU, with the builds whose kernels actually ran."""
    calls, real = [], library.module_for

    def spy(variant):
        calls.append(variant)
        return real(variant)

    library.module_for = spy
    try:
        cases = [routing_case(kind, dtype, op, torch.device(device), calls) for kind, dtype in ROUTING_CASES]
    finally:
        library.module_for = real
    return {"variant": op, "variant16": routing.build16(op, None), "rule": list(routing.RULE), "cases": cases}


def autocast_training(base, xb, target, op: str, steps: int, lr: float) -> dict:
    """``steps`` Adam steps under torch.autocast(bfloat16) of nn.ELU's model and of swap_elu's, from the same
    weights: the losses, and whether the first forward is bit for bit the same."""
    device = xb.device
    models = {"nn.ELU": copy.deepcopy(base), "elu_study.ELU": swap_elu(copy.deepcopy(base), variant=op)}
    with torch.autocast(device.type, dtype=AUTOCAST_DTYPE):
        outs = {name: m(xb) for name, m in models.items()}
    forward = compare(outs["elu_study.ELU"], outs["nn.ELU"])
    dtype = str(outs["nn.ELU"].dtype).removeprefix("torch.")
    del outs
    losses = {}
    for name, model in models.items():
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        trace = []
        for _ in range(steps):
            opt.zero_grad(set_to_none=True)
            with torch.autocast(device.type, dtype=AUTOCAST_DTYPE):
                loss = F.mse_loss(model(xb).float(), target)
            loss.backward()
            opt.step()
            trace.append(float(loss.item()))
        losses[name] = trace
    a, b = losses["nn.ELU"], losses["elu_study.ELU"]
    return {"dtype": str(AUTOCAST_DTYPE).removeprefix("torch."), "output_dtype": dtype, "variant": op,
            "variant16": routing.build16(op, None), "steps": steps, "lr": lr, "forward": forward,
            "losses": losses, "losses_identical": a == b,
            "max_rel_loss_diff": max(abs(x - y) / abs(x) if x else abs(y) for x, y in zip(a, b))}
