"""The drop-in's checks on the GPU, each a dict with ``passed`` and what it measured (``checks`` in the record).
Output buffers a check reads are poisoned with NaN first; inputs are ``randn`` x 6 with specials planted."""

import copy

import torch
import torch.nn.functional as F
from torch import nn
from torch.library import opcheck

from elu_study.core.check import ulp_error
from elu_study.pytorch.nn import ELU, swap_elu

SPECIALS = (0.0, -0.0, 1e-30, -1e-30, 1e-45, -1e-45, -1e-7, -88.0, -104.0, -1e30, 3e38, -3e38, float("inf"),
            float("-inf"), float("nan"))
ALPHAS = (1.0, 0.5, 2.5)
CHUNK = 1 << 27  # negative float32 bit patterns per exhaustive chunk
# The negative finite float32s as signed int32 bit patterns: -0.0 (0x80000000) up to -FLT_MAX (0xFF7FFFFF)
NEGATIVE_FINITE = (-(2**31), -(2**23))
DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64)


def inputs(n: int) -> torch.Tensor:
    x = torch.randn(n, device="cuda", generator=torch.Generator(device="cuda").manual_seed(0)) * 6
    x[: len(SPECIALS)] = torch.tensor(SPECIALS, device="cuda")
    return x


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit for bit, NaN where the other has NaN."""
    return bool(torch.equal(a.detach().nan_to_num(7), b.detach().nan_to_num(7)))


def worst_ulp(fn, alpha: float) -> float:
    """The worst ulp error of ``fn`` over every negative finite float32 (the positive ones are x itself)."""
    worst = 0.0
    for lo in range(NEGATIVE_FINITE[0], NEGATIVE_FINITE[1], CHUNK):
        x = torch.arange(lo, min(lo + CHUNK, NEGATIVE_FINITE[1]), dtype=torch.int32, device="cuda").view(torch.float32)
        worst = max(worst, float(ulp_error(fn(x, alpha), x, alpha).max()))
    return worst


def accuracy() -> dict:
    """The float32 default's worst ulp over every negative float32, beside F.elu's, at the check's alphas."""
    rows = {f"{alpha:g}": {"elu_study.ELU": worst_ulp(lambda x, a: ELU(a)(x), alpha),
                           "F.elu": worst_ulp(F.elu, alpha)} for alpha in ALPHAS}
    return {"passed": rows["1"]["elu_study.ELU"] <= 2.0, "worst_ulp_by_alpha": rows,
            "inputs_per_alpha": NEGATIVE_FINITE[1] - NEGATIVE_FINITE[0]}


def opchecks() -> dict:
    results = []
    for dtype in DTYPES:  # (opcheck compares without equal_nan: no NaN planted: the later checks plant specials)
        base = (torch.randn(2, 3, 8, 8, device="cuda", generator=torch.Generator("cuda").manual_seed(0)) * 4).to(dtype)
        for x in (base, base.contiguous(memory_format=torch.channels_last), base.transpose(1, 3), base[:, ::2]):
            g = torch.randn_like(x)
            results += [opcheck(torch.ops.elu_study.elu.default, (x.clone().requires_grad_(), 0.5)),
                        opcheck(torch.ops.elu_study.elu_.default, (x.clone(), 0.5)),
                        opcheck(torch.ops.elu_study.elu_backward.default,
                                (g.requires_grad_(), x.clone().requires_grad_(), 0.5, False))]
    failed = [r for r in results if any(v != "SUCCESS" for v in r.values())]
    return {"passed": not failed, "calls": len(results), "failed": [str(r) for r in failed]}


def gradients() -> dict:
    x64 = (torch.randn(40, device="cuda", dtype=torch.float64) * 3).requires_grad_()
    checks = {"gradcheck_float64": torch.autograd.gradcheck(ELU(0.7), (x64,)),
              "gradgradcheck_float64": torch.autograd.gradgradcheck(ELU(0.7), (x64,))}
    x = inputs(4097).requires_grad_()
    r = x.detach().clone().requires_grad_()
    g = torch.randn_like(x)
    (a,) = torch.autograd.grad(ELU(0.5)(x), x, g, create_graph=True)
    (b,) = torch.autograd.grad(F.elu(r, 0.5), r, g, create_graph=True)
    checks["float32_grad_bit_identical"] = same(a, b)
    checks["float32_double_backward_bit_identical"] = same(torch.autograd.grad(a, x, g)[0],
                                                           torch.autograd.grad(b, r, g)[0])
    t, v = torch.randn_like(x), x.detach()
    checks["forward_ad_equal"] = same(torch.func.jvp(ELU(0.5), (v,), (t,))[1],
                                      torch.func.jvp(lambda u: F.elu(u, 0.5), (v,), (t,))[1])
    checks["vmap_close"] = bool(torch.allclose(torch.func.vmap(ELU(0.5))(v.view(17, -1)), F.elu(v.view(17, -1), 0.5),
                                               equal_nan=True))
    return {"passed": all(checks.values()), **checks}


def cuda_graph() -> dict:
    x = inputs(4096 + 3).requires_grad_()
    g, model, side = torch.randn_like(x), ELU(0.5), torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            model(x).backward(g)
    torch.cuda.current_stream().wait_stream(side)
    x.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = model(x)
        y.backward(g)
    y.detach().fill_(float("nan"))
    x.grad.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    fwd = same(y, ELU(0.5)(x.detach()))
    bwd = same(x.grad, torch.ops.aten.elu_backward(g, 0.5, 1, 1, False, x.detach()))
    return {"passed": fwd and bwd, "replay_equals_eager_forward": fwd, "replay_equals_eager_backward": bwd}


def layouts_and_tracing() -> dict:
    x = torch.randn(8, 16, 32, 32, device="cuda").contiguous(memory_format=torch.channels_last)
    ELU()(x)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        y = ELU()(x)
        torch.cuda.synchronize()
    kernels = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    model = nn.Sequential(nn.Linear(16, 32), ELU(0.5), nn.Linear(32, 4)).cuda()
    xb = torch.randn(8, 16, device="cuda")
    exported = torch.export.export(model, (xb,))
    graphs = []
    for strict in (False, True):
        torch._dynamo.reset()
        fn = torch.compile(lambda t, s=strict: ELU(0.5, strict=s)(t) * 2 + 1, fullgraph=True,
                           backend=lambda gm, _: graphs.append(str(gm.graph)) or gm)
        fn(xb)
    ref = nn.Sequential(nn.Linear(16, 32), nn.ELU(0.5), nn.Linear(32, 4)).cuda()
    nets = (ref, swap_elu(copy.deepcopy(ref)))
    with torch.autocast("cuda", dtype=torch.bfloat16):
        outs = [m(xb) for m in nets]
    checks = {
        "channels_last_kept": y.is_contiguous(memory_format=torch.channels_last),
        "channels_last_kernels": len(kernels),
        "export_has_the_op": "elu_study.elu.default" in str(exported.graph),
        "export_output_equal": bool(torch.equal(exported.module()(xb), model(xb))),
        "compile_fuses_f_elu": "torch.nn.functional.elu" in graphs[0] and "elu_study" not in graphs[0],
        "compile_strict_keeps_the_op": "torch.ops.elu_study.elu" in graphs[1],
        "autocast_bit_identical": bool(torch.equal(outs[0], outs[1])) and outs[1].dtype == torch.bfloat16,
    }
    passed = all(v for k, v in checks.items() if k != "channels_last_kernels") and checks["channels_last_kernels"] == 1
    return {"passed": passed, **checks}
