"""The kernels as a PyTorch op (elu_study.library, elu_study.nn): registration and fake tensors on the
CPU; opcheck, autograd, torch.compile(fullgraph=True), CUDA graphs and the backward kernel on a GPU."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from elu_study.core.check import ATOL, RTOL
from elu_study.core.entries import STEPS
from elu_study.pytorch import library, routing
from elu_study.pytorch.nn import ELU, swap_elu

def gpu(test):
    skip = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: the op runs the kernels")
    return pytest.mark.gpu(skip(test))
V = library.DEFAULT_VARIANT


# ---------------------------------------------------------------- CPU: registration, fake tensors, modules


def test_the_ops_are_registered_with_their_schemas():
    for name, args in (("elu", "Tensor x, float alpha, str variant, bool save_result"),
                       ("elu_backward", "Tensor grad_output, Tensor x_or_result, float alpha, bool is_result, str variant"),
                       ("elu_", "Tensor(a0!) x, float alpha, str variant")):
        schema = str(getattr(torch.ops.elu_study, name).default._schema)
        assert schema.startswith(f"elu_study::{name}({args})"), schema


@pytest.mark.parametrize("shape, transpose", [((3, 5), False), ((6, 8), True), ((0, 4), False), ((2, 3, 4), True), ((), False)])
def test_the_fake_gives_a_contiguous_float32_of_the_shape_without_compiling(shape, transpose, monkeypatch):
    monkeypatch.setattr(library, "module_for", lambda v: pytest.fail("a fake must not build a kernel"))
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.randn(shape)
        if transpose and x.dim() >= 2:
            x = x.transpose(0, 1)
        y = torch.ops.elu_study.elu(x, 1.0, V, False)
        g = torch.ops.elu_study.elu_backward(y, x, 0.5, False, V)
    for t in (y, g):
        assert t.shape == x.shape and t.dtype == torch.float32 and t.is_contiguous()
        assert t.stride() == torch.empty(x.shape).stride()
    meta = torch.ops.elu_study.elu(torch.empty(shape, device="meta"), 1.0, V, False)
    assert meta.device.type == "meta" and meta.shape == torch.Size(shape)


def test_the_fake_backward_refuses_different_shapes():
    with pytest.raises(Exception, match="differ"):
        torch.ops.elu_study.elu_backward(torch.empty(3, device="meta"), torch.empty(4, device="meta"), 1.0, False, V)


def test_the_notebooks_op_signatures_are_formatted_here_not_by_torch():
    from elu_study.jobs.model.analysis import op_signature

    assert op_signature("elu") == "elu_study::elu(x: Tensor, alpha: float, variant: str, save_result: bool) -> Tensor"
    assert op_signature("elu_backward") == ("elu_study::elu_backward(grad_output: Tensor, x_or_result: Tensor, "
                                            "alpha: float, is_result: bool, variant: str) -> Tensor")
    assert op_signature("elu_") == "elu_study::elu_(x: Tensor (written in place), alpha: float, variant: str) -> None"


def test_importing_elu_study_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, elu_study; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


@pytest.mark.parametrize("alpha, inplace", [(1.0, False), (0.5, True), (-0.7, False), (2, True)])
def test_elu_reads_as_nn_elu(alpha, inplace):
    ours, theirs = ELU(alpha, inplace), nn.ELU(alpha, inplace)
    assert ours.extra_repr() == theirs.extra_repr() and repr(ours) == repr(theirs)
    assert ours.variant == V and list(ours.parameters()) == []


def test_swap_elu_replaces_every_nn_elu_and_keeps_alpha_and_inplace():
    model = nn.Sequential(nn.Linear(4, 4), nn.ELU(0.3), nn.Sequential(nn.ELU(inplace=True), nn.ModuleList([nn.ReLU(), nn.ELU(-0.5)])))
    before = copy.deepcopy(model)
    assert swap_elu(model, variant="5_streaming") is model
    olds = [m for m in before.modules() if isinstance(m, nn.ELU)]
    news = [m for m in model.modules() if isinstance(m, ELU)]
    assert len(olds) == len(news) == 3 and not any(type(m) is nn.ELU for m in model.modules())
    assert [(m.alpha, m.inplace) for m in olds] == [(m.alpha, m.inplace) for m in news]
    assert all(m.variant == "5_streaming" for m in news)
    assert isinstance(model[2][1][0], nn.ReLU) and model[0].weight is not None
    assert isinstance(swap_elu(nn.ELU(0.2)), ELU)


# ---------------------------------------------------------------- GPU: the op against PyTorch


def _x(n, offset=0, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    base = torch.randn(n + offset, device="cuda", generator=gen).mul_(4)
    base[offset: offset + 3] = torch.tensor([0.0, -0.0, -1e-30], device="cuda")[: max(0, min(3, n))]
    return base[offset:]


@gpu
def test_opcheck_passes_every_check():
    x = _x(4099).view(1, 4099).requires_grad_()
    torch.library.opcheck(torch.ops.elu_study.elu.default, (x, 0.5, V, False))
    torch.library.opcheck(torch.ops.elu_study.elu.default, (_x(64).requires_grad_(), 1.0, V, True))
    torch.library.opcheck(torch.ops.elu_study.elu_backward.default, (_x(1027, seed=1), _x(1027), -0.7, False, V))


@gpu
@pytest.mark.parametrize("alpha", [1.0, 0.5, 0.0, -0.7])
@pytest.mark.parametrize("n, offset", [(1, 0), (5, 0), (4097, 0), (4097, 1), (2**20 + 3, 3)])
def test_backward_matches_aten_and_autograd(alpha, n, offset):
    x, g = _x(n, offset), _x(n, offset, seed=1)
    want = torch.ops.aten.elu_backward(g, alpha, 1, 1, False, x)
    got = library.elu_backward(g, x, alpha, False)
    torch.testing.assert_close(got, want, rtol=RTOL, atol=ATOL)
    xr = x.clone().requires_grad_()
    (auto,) = torch.autograd.grad(F.elu(xr, alpha), xr, g)
    (ours,) = torch.autograd.grad(library.elu(xr, alpha), xr, g)
    torch.testing.assert_close(ours, auto, rtol=RTOL, atol=ATOL)
    if alpha >= 0:  # from the result, as elu_ saves it
        y = F.elu(x, alpha)
        torch.testing.assert_close(library.elu_backward(g, y, alpha, True),
                                   torch.ops.aten.elu_backward(g, alpha, 1, 1, True, y), rtol=RTOL, atol=ATOL)


@gpu
def test_backward_refuses_bad_inputs_and_the_context_lives():
    m = library.module_for(V)
    x = _x(16)
    with pytest.raises(RuntimeError, match="negative slope"):
        m.elu_backward(x, x, -0.5, True)
    with pytest.raises(ValueError, match="grad_output must be a CUDA tensor"):
        m.elu_backward(x.cpu(), x, 1.0)
    with pytest.raises(ValueError, match="x has shape"):
        m.elu_backward(x, _x(15), 1.0)
    with pytest.raises(ValueError, match="alpha must be finite"):
        m.elu_backward(x, x, float("nan"))
    with pytest.raises(RuntimeError, match="shares memory"):
        base = _x(17)
        m.elu_backward(base[:16], x, 1.0, out=base[1:])
    torch.testing.assert_close(m.elu_backward(x, x, 1.0), torch.ops.aten.elu_backward(x, 1.0, 1, 1, False, x))


@gpu
def test_requires_grad_gets_a_gradient_through_the_op_and_the_module():
    x = _x(1000).requires_grad_()
    y = library.elu(x, 1.0)
    assert y.requires_grad and y.grad_fn is not None
    y.sum().backward()
    torch.testing.assert_close(x.grad, torch.where(x > 0, 1.0, torch.exp(x)).detach(), rtol=RTOL, atol=ATOL)
    a = _x(1000).requires_grad_()
    b = a.detach().clone().requires_grad_()
    g = _x(1000, seed=1)
    ELU(0.5, inplace=True)(a * 1.0).backward(g)  # a non-leaf in place, as nn.ELU(inplace=True) takes it
    nn.ELU(0.5, inplace=True)(b * 1.0).backward(g)
    torch.testing.assert_close(a.grad, b.grad, rtol=RTOL, atol=ATOL)
    with torch.no_grad():  # no gradient needed: truly in place
        c = _x(1000)
        before = c.data_ptr()
        out = ELU(0.5, inplace=True)(c)
        assert out.data_ptr() == before
        torch.testing.assert_close(c, F.elu(_x(1000), 0.5), rtol=RTOL, atol=ATOL)


@gpu
def test_fullgraph_compile_has_no_graph_break_and_agrees():
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    model = swap_elu(nn.Sequential(nn.Linear(64, 128), nn.ELU(0.5), nn.Linear(128, 8))).cuda()
    ref = copy.deepcopy(model)
    compiled = torch.compile(model, fullgraph=True)
    x = torch.randn(32, 64, device="cuda")
    out = compiled(x)
    out.square().sum().backward()
    assert sum(counters["graph_break"].values()) == 0
    explained = torch._dynamo.explain(lambda t: library.elu(t, 0.5) * 2 + 1)(x)
    assert explained.graph_break_count == 0 and explained.graph_count == 1
    expected = ref(x)
    expected.square().sum().backward()
    torch.testing.assert_close(out, expected, rtol=RTOL, atol=ATOL)
    for a, b in zip(compiled.parameters(), ref.parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-3, atol=1e-4)


@gpu
def test_cuda_graph_captures_and_replays_the_op():
    x = _x(1 << 16)
    g = _x(1 << 16, seed=1)
    library.elu(x, 0.5), library.elu_backward(g, x, 0.5)  # built and warm before capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = library.elu(x, 0.5)
        gx = library.elu_backward(g, x, 0.5)
    for seed in (2, 3):
        x.copy_(_x(1 << 16, seed=seed))
        y.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(y, F.elu(x, 0.5), rtol=RTOL, atol=ATOL)
        torch.testing.assert_close(gx, torch.ops.aten.elu_backward(g, 0.5, 1, 1, False, x), rtol=RTOL, atol=ATOL)


@gpu
def test_elu_module_forward_and_backward_equal_nn_elu():
    torch.manual_seed(0)
    base = nn.Sequential(nn.Linear(32, 64), nn.ELU(0.7), nn.Linear(64, 64), nn.ELU(), nn.Linear(64, 4)).cuda()
    ours = swap_elu(copy.deepcopy(base))
    x = torch.randn(128, 32, device="cuda")
    for m in (base, ours):
        m(x).square().mean().backward()
    torch.testing.assert_close(ours(x), base(x), rtol=RTOL, atol=ATOL)
    for a, b in zip(ours.parameters(), base.parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-3, atol=1e-5)


# ---------------------------------------------------------------- CPU: the op's Python logic, with a stand-in module


class _TorchModule:
    """binding.cpp's elu and elu_backward in PyTorch, on the CPU: stands in for a compiled variant."""

    def __init__(self):
        self.calls = []

    def elu(self, x, alpha=1.0, out=None):
        self.calls.append("elu")
        y = F.elu(x.contiguous(), alpha)
        return out.copy_(y) if out is not None else y

    def elu_backward(self, g, x, alpha=1.0, is_result=False, out=None):
        self.calls.append("elu_backward")
        r = torch.ops.aten.elu_backward(g.contiguous(), alpha, 1, 1, is_result, x.contiguous()).contiguous()
        return out.copy_(r) if out is not None else r


@pytest.fixture
def on_cpu(monkeypatch):
    """The kernels stood in for on the CPU: CPU tensors route to "the kernel", which is _TorchModule."""
    fake = _TorchModule()
    monkeypatch.setattr(library, "module_for", lambda variant: fake)
    monkeypatch.setattr(routing, "KERNEL_DEVICE", "cpu")
    return fake


def test_opcheck_passes_with_the_kernels_stood_in_for(on_cpu):
    x = torch.randn(7, 33).requires_grad_()
    torch.library.opcheck(torch.ops.elu_study.elu.default, (x, 0.5, V, False))
    torch.library.opcheck(torch.ops.elu_study.elu.default, (x, 0.5, V, True))
    torch.library.opcheck(torch.ops.elu_study.elu_backward.default, (torch.randn(5, 3), torch.randn(5, 3), -0.7, False, V))
    torch.library.opcheck(torch.ops.elu_study.elu_.default, (torch.randn(5, 3), 0.5, V))
    assert {"elu", "elu_backward"} <= set(on_cpu.calls)


def test_strict_keeps_the_op_under_fullgraph_compile_with_autograd(on_cpu):
    """strict=True: the kernel under torch.compile too, as the opaque op (forward and backward through it)."""
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    ref = nn.Sequential(nn.Linear(8, 16), nn.ELU(0.5), nn.Linear(16, 4), nn.ELU(inplace=True))
    ours = swap_elu(copy.deepcopy(ref), strict=True)
    xb = torch.randn(32, 8)
    torch._dynamo.reset()
    counters.clear()
    out = torch.compile(ours, fullgraph=True, backend="aot_eager")(xb)
    out.sum().backward()
    expected = ref(xb)
    expected.sum().backward()
    assert sum(counters["graph_break"].values()) == 0
    assert on_cpu.calls.count("elu_backward") == 2  # the backward ran through the op, once per ELU
    torch.testing.assert_close(out, expected)
    for a, b in zip(ours.parameters(), ref.parameters()):
        torch.testing.assert_close(a.grad, b.grad)
    explained = torch._dynamo.explain(lambda t: library.elu(t, 0.5, strict=True) * 2 + 1)(xb)
    assert explained.graph_count == 1 and explained.graph_break_count == 0


def dynamo_graph(fn, *args):
    """The FX graph Dynamo captures of ``fn`` (fullgraph) and the compiled function's result."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    out = torch.compile(fn, fullgraph=True, backend=backend)(*args)
    (gm,) = graphs
    return gm, out


def test_compile_takes_the_fusing_route_and_eager_the_kernel(on_cpu):
    """By default, what Dynamo traces is F.elu (Inductor can fuse it); strict=True traces the op; eager runs
    the kernel either way; the compiled model's values and gradients are nn.ELU's."""
    x = torch.randn(6, 5)
    gm, out = dynamo_graph(lambda t: library.elu(t, 0.5) * 2 + 1, x)
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert F.elu in targets and not any("elu_study" in str(t) for t in targets)
    torch.testing.assert_close(out, F.elu(x, 0.5) * 2 + 1, rtol=0, atol=0)
    assert on_cpu.calls == []  # neither tracing nor the compiled function ran the kernel
    gm, out = dynamo_graph(lambda t: library.elu(t, 0.5, strict=True) * 2 + 1, x)
    targets = [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
    assert "elu_study.elu.default" in targets and F.elu not in targets
    assert on_cpu.calls == ["elu"]  # the compiled function ran the op: the kernel
    torch.testing.assert_close(out, F.elu(x, 0.5) * 2 + 1, rtol=0, atol=0)
    library.elu(x, 0.5)
    assert on_cpu.calls == ["elu", "elu"]  # eager: the kernel
    torch.manual_seed(0)
    ref = nn.Sequential(nn.Linear(8, 16), nn.ELU(0.5), nn.Linear(16, 4), nn.ELU(inplace=True))
    ours = swap_elu(copy.deepcopy(ref))
    xb = torch.randn(32, 8)
    torch._dynamo.reset()
    out = torch.compile(ours, fullgraph=True, backend="aot_eager")(xb)
    out.sum().backward()
    expected = ref(xb)
    expected.sum().backward()
    torch.testing.assert_close(out, expected)
    for a, b in zip(ours.parameters(), ref.parameters()):
        torch.testing.assert_close(a.grad, b.grad)
    assert on_cpu.calls == ["elu", "elu"]  # the compiled model ran F.elu and aten's backward


@pytest.mark.filterwarnings("ignore:`torch.jit.trace` is deprecated")
def test_jit_trace_records_the_op(on_cpu):
    x = torch.randn(7)
    traced = torch.jit.trace(lambda t: library.elu(t, 0.3) * 2, x)
    assert "elu_study::elu" in str(traced.graph)
    torch.testing.assert_close(traced(x), F.elu(x, 0.3) * 2, rtol=0, atol=0)


def test_torch_func_transforms_get_f_elus_rules(on_cpu):
    """vmap, grad and jacrev through the drop-in: F.elu's own rules (the custom op has none for them)."""
    x = torch.randn(4, 5) * 3
    for fn in (lambda t: library.elu(t, 0.5), ELU(0.5)):
        torch.testing.assert_close(torch.func.vmap(fn)(x), F.elu(x, 0.5), rtol=0, atol=0)
        torch.testing.assert_close(torch.func.grad(lambda t: fn(t).sum())(x),
                                   torch.func.grad(lambda t: F.elu(t, 0.5).sum())(x), rtol=0, atol=0)
        torch.testing.assert_close(torch.func.jacrev(fn)(x[0]), torch.func.jacrev(lambda t: F.elu(t, 0.5))(x[0]),
                                   rtol=0, atol=0)
    assert on_cpu.calls == []


def test_eager_calls_skip_the_dispatcher(on_cpu, monkeypatch):
    """A plain eager call goes to the binding (no gradient) or KernelELU (a gradient): never the custom op."""
    def dispatched(*args):
        raise LookupError("dispatched")

    monkeypatch.setattr(library, "elu_op", dispatched)
    x = torch.randn(50)
    torch.testing.assert_close(library.elu(x, 0.3), F.elu(x, 0.3), rtol=0, atol=0)
    xg = x.clone().requires_grad_()
    library.elu(xg, 0.3).sum().backward()
    torch.testing.assert_close(xg.grad, torch.autograd.grad(F.elu(x.requires_grad_(), 0.3).sum(), x)[0])
    assert on_cpu.calls == ["elu", "elu", "elu_backward"]
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():  # a fake tensor is not eager: the op (and its fake)
        assert not library.eager_only(torch.randn(3))
        with pytest.raises(LookupError, match="dispatched"):
            library.elu(torch.randn(3))


def test_in_place_keeps_nn_elus_semantics(on_cpu):
    a = torch.randn(50, requires_grad=True)
    b = a.detach().clone().requires_grad_()
    g = torch.randn(50)
    ELU(0.5, inplace=True)(a * 1.0).backward(g)
    nn.ELU(0.5, inplace=True)(b * 1.0).backward(g)
    torch.testing.assert_close(a.grad, b.grad)
    with torch.no_grad():
        for t in (torch.randn(10), torch.randn(10, 4).t()):
            before = t.clone()
            assert ELU(0.3, inplace=True)(t) is t
            torch.testing.assert_close(t, F.elu(before, 0.3))
    with pytest.raises(RuntimeError, match="negative slope"):
        ELU(-0.5, inplace=True)(torch.randn(5, requires_grad=True) * 1.0)
    assert library.elu(torch.randn(5, requires_grad=True)).requires_grad


def test_the_model_job_runs_its_checks_and_writes_a_record_and_figure(on_cpu, monkeypatch, tmp_path):
    """A dry run of ``python -m elu_study model``'s logic on the CPU: small shape, stand-in kernels,
    aot_eager, and a stand-in for the timer; the record's summary, description and figure from it."""
    from elu_study.core import build
    from elu_study.core import hardware
    from elu_study.core.record import save, save_figure
    from elu_study.core import timing
    from elu_study.jobs.model import analysis, figures, measure
    from elu_study.jobs.model import host as host_module

    monkeypatch.setattr(build, "build_all", lambda jobs, workers=None: None)
    monkeypatch.setattr(build, "compile_variant", lambda v, **kw: on_cpu)
    monkeypatch.setattr(hardware, "provenance", lambda: {"gpu": "CPU dry run", "date_utc": "2026-01-01", "commit": None})

    def fake_timer(calls, rounds=3, progress=False, **kw):
        out = {}
        for i, (name, fn) in enumerate(calls.items()):
            fn()
            out[name] = timing.summarize([[1.0 + i / 10] * 4 for _ in range(rounds)])
        return out

    monkeypatch.setattr(timing, "time_interleaved", fake_timer)
    precision = torch.get_float32_matmul_precision()
    record = measure.run(shape=(64, 1027), rounds=2, progress=False, device="cpu", backend="aot_eager",
                         mlp={"d_in": 16, "width": 32, "depth": 2, "d_out": 8, "batch": 64},
                         host_options={"sizes": (1024, 4096), "calls": 5, "repeats": 2}, double_n=1024)
    assert torch.get_float32_matmul_precision() == precision
    assert record["checks"]["mlp_compiled"]["graph_breaks"] == 0
    assert set(record["timings"]) == set(record["entries"])
    assert {e["group"] for e in record["entries"].values()} == {"forward", "backward", "fusion", "graph", "model"}
    assert {measure.THREE_STREAMS, measure.GRAPH_EAGER, measure.GRAPH_REPLAY} <= set(record["timings"])
    assert record["checks"]["cuda_graph"] == {"captured_in_a_cuda_graph": False, "replay_equals_eager_forward": True,
                                              "replay_equals_eager_backward": True}
    assert record["mlp"]["swap_elu_variant"] == "2_float4" and record["mlp"]["optimizer"] == "Adam"
    a, b = record["losses"]["nn.ELU"], record["losses"]["elu_study.ELU"]
    assert len(a) == measure.TRAIN_STEPS and max(abs(x - y) / abs(x) for x, y in zip(a, b)) < 1e-5
    assert a[-1] < 0.9 * a[0]  # it trains towards the learnable target: the agreement above means something
    path = tmp_path / "cpu-model.json"
    save(record, "model", path=path)
    again = analysis.read_record(path=path)
    s = analysis.summary(again)
    assert s["backward_estimate_ms"] == pytest.approx(1.5 * s["copy_ms"])
    assert s["backward_x_three_streams"] == pytest.approx(s["backward_ms"] / again["timings"][measure.THREE_STREAMS]["median_ms"])
    share = analysis.elu_share(again)
    m = again["mlp"]
    assert share["elu_bytes"] == 5 * 4 * m["depth"] * m["batch"] * m["width"] and 0 < share["share"]
    assert analysis.overlap(again, "copy_", "copy_") and not analysis.overlap(again, "copy_", "F.elu")  # the stand-in timer's 1.0 vs 1.1 ms
    assert "backward op 2_float4" in analysis.describe(again)
    assert save_figure(figures.figure(again), tmp_path / "cpu-model.png").stat().st_size > 10_000
    # schema 3: the drop-in's checks, routes and host cost
    assert {measure.FUSED_FELU, measure.FUSED_DROPIN, measure.FUSED_OP, measure.MLP_OPAQUE} <= set(record["timings"])
    db = again["double_backward"]
    assert set(db["steps"]) == set(measure.step_variants()) and all(r["passed"] for r in db["steps"].values())
    assert all(r["bit_identical"] for r in db["steps"].values())  # the stand-in is aten: bit for bit
    assert db["gradgradcheck_float64"]["all_passed"]
    cases = analysis.routing_table(again)
    assert len(cases) == 7 and (cases["forward"] == "bit for bit").all()
    auto = analysis.autocast_summary(again)
    assert auto["forward_bit_identical"] and auto["losses_identical"] and auto["variant16"] == "6_beyond_copy"
    assert "bf16 autocast" in analysis.describe(again)
    host = analysis.host_table(again)
    assert list(host.columns) == [1024, 4096] and (host.values > 0).all()
    h = analysis.host_summary(again)
    assert h["after_x_before"] > 0 and set(again["host"]["profile"]["routes"]) == set(host_module.PROFILED)
    top = analysis.profile_table(again, host_module.BEFORE)
    assert len(top) and "elu_study::elu" in set(top["name"])  # the op's dispatch shows in its profile
    r = analysis.routes(again)
    assert r["dropin_x_felu"] > 0 and analysis.grade(1.0, 0.98, 1.02) == "HELD" and analysis.grade(2, 0, 1) == "MISSED"


def test_the_model_notebooks_numbers_come_from_the_committed_record():
    """Notebook 11's tables and labels from the H200 record (no GPU): the timing table sorted by group, the
    opaque op's MLP ratio apart from the fusing drop-in's, the profiler's own share, no Python frames."""
    from elu_study.jobs.model import analysis, measure
    from elu_study.jobs.model.host import AFTER, BEFORE

    record = analysis.read_record()
    table = analysis.timing_table(record)
    assert set(table["entry"]) == set(record["timings"]) and table["x copy_"].isna().sum() == len(
        analysis.entries(record, "model"))
    assert list(dict.fromkeys(table["group"])) == [g for g in analysis.GROUP_ORDER if g in set(table["group"])]
    assert {"runs", "what"} <= set(analysis.timing_table(record, full=True).columns)
    s = analysis.summary(record)
    assert s["mlp_compiled_opaque_x_compiled"] == pytest.approx(
        analysis.median(record, measure.MLP_OPAQUE) / analysis.median(record, "MLP nn.ELU compiled"))
    assert s["mlp_compiled_opaque_x_compiled"] != s["mlp_compiled_op_x_compiled"]  # the opaque op, not the drop-in
    shares = [analysis.profiler_share(record, r) for r in (BEFORE, AFTER)]
    assert all(0.5 < x < 0.7 for x in shares)  # the profiler's own buffer request: 53-64 % on the H200
    assert analysis.python_frames(record) == []  # so the Python-layer predictions are not measurable
    assert analysis.not_measurable("x", "why") == "x: not measurable (why)"
    assert analysis.verdict("a", 1.0, (0.98, 1.02)) == "a: 1.000 (predicted 0.98 to 1.02): HELD"
    beyond = analysis.beyond_x_copy(record["provenance"]["gpu"])
    assert beyond is None or set(beyond) <= set(analysis.BEYOND_NAMES)


def test_the_sanitizer_and_the_fuzzer_know_the_backward_op():
    """elu_study.ops lists elu_backward, so the sanitizer's child and the fuzz tests call it on every build;
    the child's workload runs it here against a stand-in and checks every result against aten."""
    from elu_study.core.ops import OPS, ops_of
    from elu_study.jobs.sanitize import child

    fake = _TorchModule()
    assert [op.name for op in ops_of(fake)] == ["elu", "elu_backward"]
    calls = child.exercise(fake.elu_backward, OPS["elu_backward"], "cpu")
    assert calls == fake.calls.count("elu_backward") and calls >= 8 * len(child.SMALL_LENGTHS)
    wrong = _TorchModule()
    wrong.elu_backward = lambda g, x, alpha=1.0, out=None: _TorchModule.elu_backward(wrong, g, x, 1.0, out=out)
    with pytest.raises(AssertionError, match="wrong result"):
        child.exercise(wrong.elu_backward, OPS["elu_backward"], "cpu")


def test_the_kernelbench_example_pairs_model_and_model_new(on_cpu):
    import importlib.util
    import inspect
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "examples" / "kernelbench_elu.py"
    spec = importlib.util.spec_from_file_location("kernelbench_elu", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    init = example.get_init_inputs()
    ref, new = example.Model(*init), example.ModelNew(*init)
    assert list(inspect.signature(example.Model.forward).parameters) == list(inspect.signature(example.ModelNew.forward).parameters)
    assert (example.batch_size, example.dim) == (4096, 393216)
    x = (torch.randn(16, 33) * 4).requires_grad_()
    y_ref, y_new = ref(x), new(x)
    torch.testing.assert_close(y_new, y_ref)
    g = torch.randn_like(y_ref)
    torch.testing.assert_close(torch.autograd.grad(y_new, x, g)[0], torch.autograd.grad(y_ref, x, g)[0])


# ---------------------------------------------------------------- double backward (CPU: PyTorch's route and the stand-in)

ALPHAS = (1.0, 0.5, 0.0, -0.7, 2.5)
SPECIALS = (0.0, -0.0, 1e-30, -1e-30, 1e-45, -1e-45, -1e-7, -88.0, -104.0, -1e30, 3e38, -3e38, 1.0, -1.0, float("nan"))


def special_inputs(dtype=torch.float32, n=300, seed=0, device="cpu"):
    gen = torch.Generator().manual_seed(seed)
    x = torch.cat([torch.tensor(SPECIALS, dtype=torch.float64), torch.randn(n, generator=gen, dtype=torch.float64) * 4])
    return x.to(dtype=dtype, device=device)


def second_derivatives(fn, x, g, gg):
    """d/dx and d/dg of <gg, grad_x <g, fn(x)>>: what a gradient penalty or a Hessian-vector product needs."""
    x = x.detach().clone().requires_grad_()
    g = g.detach().clone().requires_grad_()
    (gx,) = torch.autograd.grad(fn(x), x, g, create_graph=True)
    return gx.detach(), *torch.autograd.grad(gx, (x, g), gg)


def equal_bits(got, want):
    """Equal as PyTorch compares with rtol=atol=0, NaN equal to NaN."""
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_opcheck_passes_where_pytorch_computes(dtype):
    """The ops on what no kernel computes (here, CPU tensors): PyTorch inside, the same fake, every opcheck test."""
    x = (torch.randn(6, 9, dtype=dtype) * 3).t().requires_grad_()  # non-contiguous
    torch.library.opcheck(torch.ops.elu_study.elu.default, (x, 0.5, V, False))
    torch.library.opcheck(torch.ops.elu_study.elu.default, (x, 0.5, V, True))
    g = torch.randn(9, 6, dtype=dtype)
    torch.library.opcheck(torch.ops.elu_study.elu_backward.default, (g, x.detach().requires_grad_(), -0.7, False, V))
    torch.library.opcheck(torch.ops.elu_study.elu_.default, (torch.randn(5, 3, dtype=dtype), 0.5, V))


@pytest.mark.parametrize("alpha", [a for a in ALPHAS if a >= 0])
def test_gradgradcheck_in_float64_through_the_ops(alpha):
    """float64 goes to PyTorch inside the ops, so gradgradcheck tests the autograd formulas themselves:
    the op's, elu_backward's (double backward) and elu_backward's again (triple)."""
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(40, generator=gen, dtype=torch.float64) * 3
    x = torch.where(x.abs() < 0.05, x + 0.2, x).requires_grad_()  # away from the kink at 0
    g = torch.randn(40, generator=gen, dtype=torch.float64, requires_grad=True)
    for save_result in (False, True):
        assert torch.autograd.gradgradcheck(lambda t: torch.ops.elu_study.elu(t, alpha, V, save_result), (x,))
    assert torch.autograd.gradgradcheck(lambda a, b: torch.ops.elu_study.elu_backward(a, b, alpha, False, V), (g, x))
    if alpha > 0:  # (alpha = 0 puts every negative x's result on the kink y = 0, where no derivative exists)
        y = F.elu(x.detach(), alpha).requires_grad_()
        assert torch.autograd.gradgradcheck(lambda a, b: torch.ops.elu_study.elu_backward(a, b, alpha, True, V), (g, y))
    assert torch.autograd.gradgradcheck(lambda t: library.elu(t, alpha), (x,))


@pytest.mark.parametrize("alpha", [-0.7, -2.0])
def test_gradgradcheck_with_a_negative_alpha(alpha):
    gen = torch.Generator().manual_seed(2)
    x = (torch.randn(30, generator=gen, dtype=torch.float64) * 3 + 0.01).requires_grad_()
    g = torch.randn(30, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda t: torch.ops.elu_study.elu(t, alpha, V, False), (x,))
    assert torch.autograd.gradgradcheck(lambda a, b: torch.ops.elu_study.elu_backward(a, b, alpha, False, V), (g, x))


@pytest.mark.parametrize("alpha", ALPHAS)
def test_double_backward_equals_felus_on_special_inputs(alpha, on_cpu):
    """float32, through the stand-in kernels (the eager route, KernelELU, and the op's route): gradients
    and second derivatives equal F.elu's bit for bit, NaN and signed zeros included."""
    x, g, gg = special_inputs(), special_inputs(seed=1).nan_to_num(0.0), special_inputs(seed=2).nan_to_num(0.0)
    want = second_derivatives(lambda t: F.elu(t, alpha), x, g, gg)
    for fn in (lambda t: library.elu(t, alpha), lambda t: torch.ops.elu_study.elu(t, alpha, V, False)):
        for got, expected in zip(second_derivatives(fn, x, g, gg), want):
            equal_bits(got, expected)
    if alpha >= 0:  # in place: autograd keeps the result (is_result)
        def in_place(t):
            return F.elu(t * 1.0, alpha, inplace=True)

        want = second_derivatives(in_place, x, g, gg)
        for got, expected in zip(second_derivatives(lambda t: library.elu(t * 1.0, alpha, inplace=True), x, g, gg), want):
            equal_bits(got, expected)
    assert "elu_backward" in on_cpu.calls


def test_second_order_through_a_model_equals_nn_elus(on_cpu):
    """A gradient penalty (the norm of d loss / d input, differentiated again) through swap_elu."""
    torch.manual_seed(0)
    ref = nn.Sequential(nn.Linear(6, 12), nn.ELU(0.8), nn.Linear(12, 1))
    ours = swap_elu(copy.deepcopy(ref))
    xb = torch.randn(16, 6)
    for model in (ref, ours):
        xi = xb.clone().requires_grad_()
        (gx,) = torch.autograd.grad(model(xi).sum(), xi, create_graph=True)
        gx.square().sum().backward()
    for a, b in zip(ours.parameters(), ref.parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=0, atol=0)
    assert on_cpu.calls.count("elu_backward") >= 2


# ---------------------------------------------------------------- routes: which computes what (CPU)


def test_the_routing_rule_on_fake_cuda_tensors():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        def route(dtype, alpha=1.0, variant=V, variant16=None, device="cuda"):
            return routing.route_name(torch.empty(3, dtype=dtype, device=device), alpha, variant, variant16)

        assert route(torch.float32) == V and route(torch.float32, variant="5_streaming") == "5_streaming"
        assert route(torch.bfloat16) == route(torch.float16) == routing.DEFAULT_VARIANT16 == "6_beyond_copy"
        assert route(torch.bfloat16, variant16="6_beyond_copy") == "6_beyond_copy"
        assert route(torch.bfloat16, variant16="5_streaming") == "PyTorch (F.elu)"  # no 16-bit path in its file
        for dtype in (torch.float64, torch.int32, torch.complex64):
            assert route(dtype) == "PyTorch (F.elu)"
        assert route(torch.float32, alpha=float("nan")) == route(torch.float32, alpha=float("inf")) == "PyTorch (F.elu)"
        assert route(torch.float32, device="cpu") == route(torch.float32, device="meta") == "PyTorch (F.elu)"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("alpha", [1.0, -0.7, 0.0])
def test_what_no_kernel_computes_is_pytorchs_result(dtype, alpha):
    """CPU tensors: F.elu's values, gradients and in-place behaviour, module or function."""
    x = special_inputs(dtype)
    equal_bits(library.elu(x, alpha), F.elu(x, alpha))
    equal_bits(ELU(alpha)(x), nn.ELU(alpha)(x))
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    g = special_inputs(dtype, seed=1)
    library.elu(a, alpha).backward(g)
    F.elu(b, alpha).backward(g)
    equal_bits(a.grad, b.grad)
    c, d = x.clone(), x.clone()
    assert ELU(alpha, inplace=True)(c) is c
    nn.ELU(alpha, inplace=True)(d)
    equal_bits(c, d)


@pytest.mark.parametrize("make, error, words", [
    (lambda: torch.randn(4), ValueError, "on cpu"),
    (lambda: torch.randn(4, dtype=torch.float64, device="meta"), ValueError, "on meta"),
])
def test_strict_refuses_what_no_kernel_computes_and_leaves_the_input(make, error, words):
    x = make()
    before = x.clone()
    for call in (lambda: library.elu(x, strict=True), lambda: ELU(strict=True, inplace=True)(x),
                 lambda: swap_elu(nn.Sequential(nn.ELU()), strict=True)(x)):
        with pytest.raises(error, match=words):
            call()
        if x.device.type != "meta":
            equal_bits(x, before)
    if x.device.type != "meta":
        equal_bits(library.elu(x), F.elu(before))  # and the next call works


def test_strict_names_the_dtype_alpha_and_16_bit_build():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        with pytest.raises(TypeError, match="no study kernel computes torch.float64"):
            library.elu(torch.empty(3, dtype=torch.float64, device="cuda"), strict=True)
        with pytest.raises(TypeError, match="no study kernel computes torch.int64"):
            library.elu(torch.empty(3, dtype=torch.int64, device="cuda"), strict=True)
        with pytest.raises(ValueError, match="alpha must be finite"):
            library.elu(torch.empty(3, device="cuda"), float("nan"), strict=True)
        with pytest.raises(TypeError, match="'5_streaming' chosen for torch.bfloat16 has no 16-bit path"):
            library.elu(torch.empty(3, dtype=torch.bfloat16, device="cuda"), strict=True, variant16="5_streaming")
        y = library.elu(torch.empty(3, dtype=torch.bfloat16, device="cuda"), strict=True)  # the op's fake
        assert y.dtype == torch.bfloat16 and y.device.type == "cuda"
    with pytest.raises(TypeError, match="alpha must be a real number"):
        library.elu(torch.randn(3), "1.0")


# ---------------------------------------------------------------- GPU: double backward, dtypes, autocast, fusion

STEP_VARIANTS = tuple(dict.fromkeys(e.variant for e in STEPS))


@pytest.fixture
def builds_used(monkeypatch):
    """The builds whose kernels the calls ran (module_for, spied on)."""
    used, real = [], library.module_for

    def spy(variant):
        used.append(variant)
        return real(variant)

    monkeypatch.setattr(library, "module_for", spy)
    return used


@gpu
@pytest.mark.parametrize("variant", STEP_VARIANTS)
def test_double_backward_on_the_gpu_equals_felus_for_every_step(variant, builds_used):
    x = special_inputs(n=4099, device="cuda")
    g, gg = (special_inputs(n=4099, seed=s, device="cuda").nan_to_num(0.0) for s in (1, 2))
    for alpha in ALPHAS:
        want = second_derivatives(lambda t: F.elu(t, alpha), x, g, gg)
        for fn in (lambda t: library.elu(t, alpha, variant), lambda t: torch.ops.elu_study.elu(t, alpha, variant, False)):
            for got, expected in zip(second_derivatives(fn, x, g, gg), want):
                torch.testing.assert_close(got, expected, rtol=RTOL, atol=ATOL, equal_nan=True)
    assert set(builds_used) == {variant}
    x64 = (torch.randn(64, device="cuda", dtype=torch.float64) * 3 + 0.01).requires_grad_()
    assert torch.autograd.gradgradcheck(lambda t: torch.ops.elu_study.elu(t, 0.7, variant, False), (x64,))


@gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_16_bit_tensors_run_step_6_bit_for_bit(dtype, builds_used):
    x = special_inputs(dtype, n=4099, device="cuda")
    assert routing.route_name(x) == "6_beyond_copy"
    for alpha in ALPHAS:
        for t in (x, x[1:], x[:4000].view(40, 100).t()):  # aligned, misaligned, strided
            equal_bits(library.elu(t, alpha), F.elu(t, alpha))
            equal_bits(ELU(alpha, strict=True)(t), nn.ELU(alpha)(t))
        g, gg = (special_inputs(dtype, n=4099, seed=s, device="cuda").nan_to_num(0.0) for s in (1, 2))
        want = second_derivatives(lambda t: F.elu(t, alpha), x, g, gg)
        for got, expected in zip(second_derivatives(lambda t: library.elu(t, alpha), x, g, gg), want):
            equal_bits(got, expected)  # the forward by step 6, the backward by aten: PyTorch's bits
    assert set(builds_used) == {"6_beyond_copy"}


@gpu
def test_what_no_kernel_computes_on_the_gpu_is_pytorchs(builds_used):
    x = special_inputs(torch.float64, device="cuda")
    before = x.clone()
    equal_bits(library.elu(x, 0.5), F.elu(x, 0.5))
    equal_bits(ELU(0.5)(x), nn.ELU(0.5)(x))
    with pytest.raises(TypeError, match="no study kernel computes torch.float64"):
        ELU(strict=True, inplace=True)(x)
    equal_bits(x, before)
    ints = torch.arange(-3, 3, device="cuda")
    with pytest.raises(RuntimeError) as theirs:
        F.elu(ints)
    with pytest.raises(RuntimeError) as ours:
        library.elu(ints)
    assert str(ours.value) == str(theirs.value)  # PyTorch's own error
    equal_bits(library.elu(x.float(), float("nan")), F.elu(x.float(), float("nan")))  # kernels take finite alphas
    assert builds_used == []
    equal_bits(library.elu(x.float(), strict=True), library.module_for(V).elu(x.float()))  # the next call works


@gpu
def test_a_bf16_autocast_model_trains_as_with_nn_elu(builds_used):
    """The same model under torch.autocast(bfloat16), nn.ELU against swap_elu: forward bit for bit, and the
    same losses step by step (the forward by step 6's 16-bit kernel, the backward by aten)."""
    torch.manual_seed(0)
    ref = nn.Sequential(nn.Linear(64, 256), nn.ELU(), nn.Linear(256, 256), nn.ELU(0.5), nn.Linear(256, 8)).cuda()
    ours = swap_elu(copy.deepcopy(ref))
    xb, target = torch.randn(512, 64, device="cuda"), torch.randn(512, 8, device="cuda")
    losses = {}
    for name, model in (("ref", ref), ("ours", ours)):
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        trace = []
        for _ in range(5):
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = model(xb)
                loss = F.mse_loss(out.float(), target)
            loss.backward()
            opt.step()
            trace.append(loss.item())
        losses[name] = trace
        assert out.dtype == torch.bfloat16
    assert losses["ours"] == losses["ref"]
    with torch.autocast("cuda", dtype=torch.bfloat16):
        equal_bits(ours(xb), ref(xb))
    assert set(builds_used) == {"6_beyond_copy"}


@gpu
def test_inductor_fuses_the_drop_in_and_not_the_opaque_op():
    from torch._inductor.utils import run_and_get_code

    x = _x(1 << 16)
    codes = {}
    for name, strict in (("fusing", False), ("opaque", True)):
        torch._dynamo.reset()
        fn = torch.compile(lambda t, strict=strict: library.elu(t, 0.5, strict=strict) * 2 + 1, fullgraph=True)
        out, code = run_and_get_code(fn, x)
        torch.testing.assert_close(out, F.elu(x, 0.5) * 2 + 1, rtol=RTOL, atol=ATOL)
        codes[name] = "\n".join(code)
    assert "elu_study" not in codes["fusing"] and codes["fusing"].count("@triton.jit") == 1
    assert "elu_study.elu" in codes["opaque"]
