"""The kernels as a PyTorch operator (kernels/common/binding.cpp, elu_study.pytorch): the real registration.

On the CPU the operator's own kernel is ATen's (CompositeExplicitAutograd), so these tests run the C++
autograd (the backward through the elu_backward op, double backward through its formula), the fake
implementations, the vmap rules and the eager entry point exactly as a GPU run does; only the CUDA kernel
differs. With a GPU the same checks run on the kernels, plus CUDA graphs and the layout without a copy.
"""

from __future__ import annotations

import copy
import math
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.library import opcheck
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from elu_study.core import record
from elu_study.core.entries import ENTRIES
from elu_study.core.build import KERNELS_DIR, build_spec, compile_variant, known_variants
from elu_study.core.check import ATOL, RTOL
from elu_study.pytorch import ops
from elu_study.pytorch.nn import ELU, swap_elu

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
ALPHAS = (1.0, 0.5, 0.0, -0.7, 2.5)


def gpu(test):
    return pytest.mark.gpu(pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")(test))


@pytest.fixture(scope="module")
def defaults():
    return ops.module_for(None)


def layouts(device, dtype=torch.float32):
    """(name, tensor) of every layout the kernels meet: contiguous, channels_last, transposed, a strided slice."""
    gen = torch.Generator().manual_seed(0)
    base = (torch.randn(2, 3, 4, 5, generator=gen, dtype=torch.float64) * 4).to(device=device, dtype=dtype)
    return [("contiguous", base), ("channels_last", base.contiguous(memory_format=torch.channels_last)),
            ("transposed", base.transpose(1, 3)), ("strided", base[:, ::2])]


# ---------------------------------------------------------------- the registration


def test_the_defaults_register_one_operator_for_every_dtype(defaults):
    assert defaults.op_namespace == ops.NAMESPACE
    schemas = {name: str(getattr(torch.ops.elu_study, name).default._schema) for name in ("elu", "elu_", "elu_backward")}
    assert schemas == {
        "elu": "elu_study::elu(Tensor self, float alpha=1.) -> Tensor",
        "elu_": "elu_study::elu_(Tensor(a!) self, float alpha=1.) -> ()",
        "elu_backward": "elu_study::elu_backward(Tensor grad_output, Tensor self_or_result, float alpha, bool is_result)"
                        " -> Tensor",
    }
    for key in ("CUDA", "CompositeExplicitAutograd", "Autograd"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key("elu_study::elu", key), key


def test_the_defaults_table_covers_every_dtype_and_direction_with_one_build_per_dtype_group():
    rows = {(r.dtype, r.direction): r for r in ops.DEFAULTS}
    assert set(rows) == {(d, w) for d in (torch.float32, *ops.SIXTEEN_BITS) for w in ("forward", "backward")}
    builds = ops.default_builds()
    cpp = builds["float32"][2]
    for r in ops.DEFAULTS:  # each row names a study entry of its own dtype and direction, built as its group's
        entry = ENTRIES[r.measured]
        assert (entry.dtype, entry.direction) == (str(r.dtype).removeprefix("torch."), r.direction), r
        assert (entry.variant, entry.flags) == builds["16-bit" if r.dtype in ops.SIXTEEN_BITS else "float32"][:2], r
    # the float32 build hands 16-bit tensors to the 16-bit build's namespace, inside the dispatcher
    delegate = build_spec(*builds["16-bit"][:2]).op_namespace()
    assert cpp == (f"-DELU_OP_NAMESPACE={ops.NAMESPACE}", f"-DELU_DELEGATE16={delegate}")
    assert ops.table()["build"].tolist() == [ENTRIES[r.measured].variant for r in ops.DEFAULTS]


def test_the_defaults_are_the_fastest_of_the_study_s_own_kernels_in_the_main_record():
    """Per dtype and direction, the default's time over its own roof is the least among the study's kernels in the
    committed main record (within the record's noise): the drop-in runs the study's best builds."""
    rec = record.load()
    rows = {r["name"]: r for r in rec["rows"]}
    for r in ops.DEFAULTS:
        mine = rows[r.measured]
        rivals = [row for row in rec["rows"] if ENTRIES.get(row["name"]) and ENTRIES[row["name"]].variant
                  and not ENTRIES[row["name"]].variant.startswith("peers/") and row["dtype"] == mine["dtype"]
                  and row["direction"] == mine["direction"] and row["mode"] != "in_place"]
        tie = record.noise(rec, r.measured, "copy_")
        best = min(rivals, key=lambda row: row["x_roof"])
        assert mine["x_roof"] <= best["x_roof"] + tie, (r.measured, best["name"], mine["x_roof"], best["x_roof"])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_passes_for_every_op_and_layout(defaults, device, dtype):
    for _name, x in layouts(device, dtype):
        g = torch.randn_like(x)
        for args in ((x.clone().requires_grad_(), 0.5), (x.clone(), -0.7)):
            opcheck(torch.ops.elu_study.elu.default, args)
        opcheck(torch.ops.elu_study.elu_.default, (x.clone(), 0.5))
        for is_result, saved in ((False, x), (True, F.elu(x, 0.5))):
            opcheck(torch.ops.elu_study.elu_backward.default,
                    (g.clone().requires_grad_(), saved.clone().requires_grad_(), 0.5, is_result))


@pytest.mark.parametrize("alpha", ALPHAS)
def test_gradcheck_and_gradgradcheck_through_the_module(defaults, alpha):
    x = (torch.randn(3, 7, dtype=torch.float64) * 3).requires_grad_()
    assert torch.autograd.gradcheck(ELU(alpha), (x,))
    assert torch.autograd.gradgradcheck(ELU(alpha), (x,))
    if alpha >= 0:  # in place: autograd keeps the result (alpha >= 0, as aten's elu_)
        assert torch.autograd.gradgradcheck(lambda t: ELU(alpha, inplace=True)(t * 1.0), (x,))


class Ops(TorchDispatchMode):
    """The ops the dispatcher runs below autograd, by name."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


def test_the_gradient_comes_from_the_operators_own_autograd(defaults):
    """Autograd is the operator's (C++): its backward runs elu_study's elu_backward, and a second backward that op's
    formula; removing the Autograd kernel leaves the output without a gradient."""
    x = torch.randn(50, dtype=torch.float64, requires_grad=True)
    y = ELU(0.5)(x)
    assert y.requires_grad and y.grad_fn.name() == "elu_study::EluBackward"
    with Ops() as seen:
        (gx,) = torch.autograd.grad(y, x, torch.ones_like(y), create_graph=True)
        gx.sum().backward()
    assert "elu_study.elu_backward" in seen.seen
    ref = x.detach().clone().requires_grad_()
    (gr,) = torch.autograd.grad(F.elu(ref, 0.5), ref, torch.ones_like(y), create_graph=True)
    gr.sum().backward()
    torch.testing.assert_close(gx, gr, rtol=0, atol=0)
    torch.testing.assert_close(x.grad, ref.grad, rtol=0, atol=0)


def test_modes_subclasses_profiler_and_overrides_see_the_op(defaults):
    x = torch.randn(8)
    with Ops() as seen:
        ELU()(x)
    assert seen.seen == ["elu_study.elu"]

    class Functions(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.seen = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.seen.append(getattr(func, "__name__", str(func)))
            return func(*args, **(kwargs or {}))

    with Functions() as functions:
        ELU()(x)
    assert "elu" in functions.seen
    with torch.profiler.profile() as prof:
        ELU()(x)
    assert "elu_study::elu" in [e.name for e in prof.events()]
    lib = torch.library.Library("elu_study", "FRAGMENT")  # a kernel registered for the op is what eager runs
    torch.library.register_kernel("elu_study::elu", "cpu", lambda t, alpha=1.0: torch.full_like(t, 7.0), lib=lib)
    try:
        assert torch.equal(ELU()(x), torch.full_like(x, 7.0))
    finally:
        lib._destroy()
    torch.testing.assert_close(ELU()(x), F.elu(x), rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_forward_mode_ad_vmap_and_functorch(defaults, device):
    x, t = torch.randn(6, 5, device=device), torch.randn(6, 5, device=device)
    y, jvp = torch.func.jvp(ELU(0.5), (x,), (t,))
    y_ref, jvp_ref = torch.func.jvp(lambda v: F.elu(v, 0.5), (x,), (t,))
    torch.testing.assert_close(jvp, jvp_ref, rtol=0, atol=0)
    tol = {"rtol": 0, "atol": 0} if device == "cpu" else {}
    torch.testing.assert_close(torch.func.vmap(ELU(0.5))(x), F.elu(x, 0.5), **tol)
    torch.testing.assert_close(torch.func.vmap(torch.func.grad(lambda v: ELU(0.5)(v).sum()))(x),
                               torch.func.vmap(torch.func.grad(lambda v: F.elu(v, 0.5).sum()))(x), **tol)


@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_fuses_and_strict_keeps_the_op(defaults, device):
    graphs = []

    def backend(gm, inputs):
        graphs.append(str(gm.graph))
        return gm

    x = torch.randn(4, 9, device=device)
    for strict in (False, True) if device == "cuda" else (False,):  # (strict refuses a CPU tensor: below)
        torch._dynamo.reset()
        fn = torch.compile(lambda t, s=strict: ELU(0.5, strict=s)(t) * 2 + 1, backend=backend, fullgraph=True)
        torch.testing.assert_close(fn(x), F.elu(x, 0.5) * 2 + 1)
    assert "torch.nn.functional.elu" in graphs[0] and "elu_study" not in graphs[0]
    assert device == "cpu" or "torch.ops.elu_study.elu" in graphs[1]


@pytest.mark.parametrize("device", DEVICES)
def test_strict_refuses_alike_in_eager_and_under_torch_compile(device):
    """What no study kernel computes (a CPU tensor, float64, a non-finite alpha, 16 bits where the build has no
    16-bit path) strict=True refuses with one error, eager or compiled (Dynamo raises it from the traced call)."""
    cases = [(torch.randn(5), 0.5, None), (torch.randn(5, device=device, dtype=torch.float64), 0.5, None),
             (torch.randn(5, device=device), math.inf, None),
             (torch.randn(5, device=device, dtype=torch.bfloat16), 0.5, "1_naive")]
    for x, alpha, variant in cases:
        with pytest.raises((ValueError, TypeError)) as eager:
            ELU(alpha, variant=variant, strict=True)(x)
        assert str(eager.value).startswith("elu (strict): ")
        torch._dynamo.reset()
        with pytest.raises(type(eager.value), match=re.escape(str(eager.value))):
            torch.compile(ELU(alpha, variant=variant, strict=True), backend="aot_eager")(x)
        assert ops.refusal(x, alpha, variant)[0] is type(eager.value)


def test_torch_export_records_the_operator(defaults):
    model = nn.Sequential(nn.Linear(4, 6), ELU(0.5), nn.Linear(6, 2))
    x = torch.randn(3, 4)
    exported = torch.export.export(model, (x,))
    assert "elu_study.elu.default" in str(exported.graph)
    torch.testing.assert_close(exported.module()(x), model(x), rtol=0, atol=0)


def test_autocast_runs_elu_in_its_inputs_dtype_as_nn_elu(defaults):
    torch.manual_seed(0)
    ref = nn.Sequential(nn.Linear(8, 16), nn.ELU(0.5), nn.Linear(16, 4))
    ours = swap_elu(copy.deepcopy(ref))
    x = torch.randn(5, 8)
    outs = []
    for model in (ref, ours):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(x)
        out.float().sum().backward()
        outs.append(out)
    assert outs[1].dtype == torch.bfloat16
    torch.testing.assert_close(outs[1], outs[0], rtol=0, atol=0)
    for a, b in zip(ours.parameters(), ref.parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=0, atol=0)


# ---------------------------------------------------------------- the module, in place, layouts, errors


@pytest.mark.parametrize("alpha, inplace", [(1.0, False), (0.5, True), (-0.7, False), (2, True)])
def test_elu_reads_as_nn_elu(alpha, inplace):
    ours, theirs = ELU(alpha, inplace), nn.ELU(alpha, inplace)
    assert repr(ours) == repr(theirs) and ours.variant is None and list(ours.parameters()) == []


def test_swap_elu_replaces_every_nn_elu_and_keeps_alpha_and_inplace():
    model = nn.Sequential(nn.Linear(2, 2), nn.ELU(0.3), nn.Sequential(nn.ELU(2.0, inplace=True)), nn.ReLU())
    swapped = swap_elu(model, strict=True)
    elus = [m for m in swapped.modules() if isinstance(m, (nn.ELU, ELU))]
    assert [(type(m), m.alpha, m.inplace, m.strict) for m in elus] == [(ELU, 0.3, False, True), (ELU, 2.0, True, True)]
    assert type(swap_elu(nn.ELU(0.5))) is ELU


@pytest.mark.parametrize("device", DEVICES)
def test_every_layout_keeps_its_memory_format_and_values(defaults, device):
    for _name, x in layouts(device):
        y = ELU(0.5)(x)
        want = F.elu(x if ops.dense(x) else x.contiguous(), 0.5)
        assert [s for s, n in zip(y.stride(), y.shape) if n > 1] == [s for s, n in zip(want.stride(), y.shape) if n > 1]
        torch.testing.assert_close(y, want, **({"rtol": 0, "atol": 0} if device == "cpu" else {}))
    x = layouts(device)[1][1]
    assert ELU()(x).is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("device", DEVICES)
def test_in_place_writes_the_input_bumps_its_version_and_keeps_autograd(defaults, device):
    x = torch.randn(4, 6, device=device)
    want, version = F.elu(x, 0.5), x._version
    assert ELU(0.5, inplace=True)(x) is x and x._version > version
    torch.testing.assert_close(x, want, **({"rtol": 0, "atol": 0} if device == "cpu" else {}))
    a = torch.randn(4, 6, device=device, requires_grad=True)
    b = a.detach().clone().requires_grad_()
    ELU(0.5, inplace=True)(a * 1.0).sum().backward()
    F.elu(b * 1.0, 0.5, inplace=True).sum().backward()
    torch.testing.assert_close(a.grad, b.grad)
    with pytest.raises(RuntimeError, match="negative slope"):
        ELU(-0.5, inplace=True)(a * 1.0)


@pytest.mark.parametrize("device", DEVICES)
def test_in_place_with_a_gradient_is_a_node_as_atens_with_its_checks(defaults, device):
    """The in-place call's node is the operator's own (EluBackwardNode with is_result, as aten's EluBackward1): it saves the
    result, so writing that tensor again is caught at backward; a leaf that requires grad is refused before
    anything is written, with aten's message; a view's base gets the gradient through it, as with F.elu."""
    a = torch.randn(4, 6, device=device, requires_grad=True)
    y = ELU(0.5, inplace=True)(a * 1.0)
    assert y.grad_fn.name() == "elu_study::EluBackward (in place)"
    y.mul_(2)  # the saved result, written again
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    leaf = torch.randn(4, 6, device=device, requires_grad=True)
    before = leaf.detach().clone()
    for elu in (ELU(0.5, inplace=True), nn.ELU(0.5, inplace=True)):
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
            elu(leaf)
    torch.testing.assert_close(leaf.detach(), before, rtol=0, atol=0)
    grads = []
    for elu in (ELU(0.5, inplace=True), nn.ELU(0.5, inplace=True)):
        b = a.detach().clone().requires_grad_()
        base = b * 1.0
        elu(base[:, 1:4])  # a view written in place: its base's history goes through it
        (base * torch.arange(24.0, device=device).view(4, 6)).sum().backward()
        grads.append(b.grad)
    torch.testing.assert_close(grads[0], grads[1], **({"rtol": 0, "atol": 0} if device == "cpu" else {}))


@pytest.mark.parametrize("device", DEVICES)
def test_bad_inputs_name_the_problem_leave_the_input_and_the_next_call_works(defaults, device):
    x = torch.randn(5, 3, device=device)
    before = x.clone()
    calls = [
        (lambda: ELU("1.0")(x), TypeError, "alpha must be a real number .* got str"),
        (lambda: ELU(variant="no_such_step"), ValueError, "unknown variant 'no_such_step'"),
        (lambda: torch.ops.elu_study.elu_backward(x, x[:4], 1.0, False), ValueError,
         r"self has shape \(4,3\) but grad_output has shape \(5,3\)"),
        (lambda: ELU(strict=True)(x.double()), ValueError if device == "cpu" else TypeError,
         "on cpu: the kernels take CUDA" if device == "cpu" else "no study kernel computes torch.float64"),
        (lambda: ELU(float("inf"), strict=True)(x), ValueError, "on cpu" if device == "cpu" else "alpha must be finite"),
    ]
    for call, error, words in calls:
        with pytest.raises(error, match=words):
            call()
        assert torch.equal(x, before)
        torch.testing.assert_close(ELU(0.5)(x), F.elu(x, 0.5))


def test_a_users_own_build_registers_its_own_namespace():
    module = ops.module_for("1_naive")
    assert module.op_namespace == build_spec("1_naive").op_namespace() != ops.NAMESPACE
    x = torch.randn(7, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradgradcheck(ELU(0.7, variant="1_naive"), (x,))


def test_a_non_tensor_input_is_a_type_error_that_names_it(defaults):
    """Before and after the module's first call (its entry point into the operator kept), strict or not, in place
    or not, through the module or the function."""
    warm, warm_ = ELU(), ELU(inplace=True)
    warm(torch.randn(3))
    warm_(torch.randn(3))
    for call in (ELU(), warm, warm_, ELU(strict=True), ELU(inplace=True), lambda v: ops.elu(v, 0.5)):
        for value in ([1.0, 2.0], None, 3.0):
            with pytest.raises(TypeError, match=f"^elu_?: expected a Tensor, got {type(value).__name__}$"):
                call(value)


def test_a_model_on_the_cpu_builds_nothing_and_gets_nn_elus_bits(tmp_path):
    """Without a GPU, nvcc or a CUDA toolkit, and with an empty extensions folder (a fresh process): ELU and a
    swap_elu'd model give F.elu's and nn.ELU's bits, outputs and gradients, in place too; strict refuses, a non-tensor
    is named; nothing is built."""
    script = textwrap.dedent("""
        import copy
        import pytest
        import torch
        import torch.nn.functional as F
        from torch import nn
        from elu_study import ELU, swap_elu

        assert not torch.cuda.is_available()
        for dtype in (torch.float32, torch.float64, torch.bfloat16):
            x = (torch.randn(1000, dtype=torch.float64) * 4).to(dtype)
            g = torch.randn_like(x)
            for alpha, inplace in ((1.0, False), (0.5, True), (-0.7, False)):
                a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
                ours, theirs = ELU(alpha, inplace)(a * 1), F.elu(b * 1, alpha, inplace)
                assert torch.equal(ours, theirs), (dtype, alpha)
                assert torch.equal(*(torch.autograd.grad(y, v, g)[0] for y, v in ((ours, a), (theirs, b))))
        ref = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ELU(0.5), nn.Flatten(), nn.Linear(144, 2), nn.ELU(inplace=True))
        model = swap_elu(copy.deepcopy(ref))
        assert [type(m) for m in model if "ELU" in type(m).__name__] == [ELU, ELU]
        inputs = torch.randn(5, 3, 8, 8)
        outs = [m(inputs) for m in (ref, model)]
        assert torch.equal(*outs)
        for out in outs:
            out.square().sum().backward()
        for p, q in zip(ref.parameters(), model.parameters()):
            assert torch.equal(p.grad, q.grad)
        with pytest.raises(ValueError, match="no study kernel computes a tensor on cpu"):
            ELU(strict=True)(inputs)
        with pytest.raises(TypeError, match="expected a Tensor, got list"):
            ELU()([1.0, 2.0])
        print("ok")
    """)
    no_nvcc = [d for d in os.environ["PATH"].split(os.pathsep) if d and not Path(d, "nvcc").exists()]
    extensions = tmp_path / "extensions"
    extensions.mkdir()
    env = {**os.environ, "PATH": os.pathsep.join(no_nvcc), "CUDA_HOME": str(tmp_path / "no-cuda"),
           "CUDA_PATH": str(tmp_path / "no-cuda"), "TORCH_EXTENSIONS_DIR": str(extensions), "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-c", script], cwd=Path(__file__).parent.parent, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
    assert list(extensions.iterdir()) == []


def test_torch_jit_script_is_refused_naming_what_takes_the_module_instead():
    model = swap_elu(nn.Sequential(nn.Linear(4, 6), nn.ELU(0.5)))
    with pytest.raises(NotImplementedError, match=r"TorchScript does not run .* use torch\.compile or torch\.export"):
        torch.jit.script(model)


# ---------------------------------------------------------------- is it ELU? the probe of a build


def _expm1_poly(x):
    """Step 6's Expm1Poly (kernels/common/elu.cuh) in float32 (its FMAs as a multiply and an add)."""
    r = torch.full_like(x, 1.29130902e-4)
    for c in (1.30112644e-3, 8.27620830e-3, 4.16474678e-2, 1.66663662e-1, 4.99999851e-1):
        r = r * x + c
    return torch.where(x > -1, torch.copysign(x * x * r + x, x), torch.exp2(x * math.log2(math.e)) - 1)


def _flushed(f):
    """f with denormals flushed to zero, in and out (--use_fast_math)."""
    tiny = torch.finfo(torch.float32).tiny
    return lambda x: (lambda y: torch.where(y.abs() < tiny, 0 * y, y))(f(torch.where(x.abs() < tiny, 0 * x, x)))


# The exponentials of the study's float32 kernels, computed by torch in float32; "exp - 1" ones cancel near 0.
STUDY_FORMULAS = {
    "Expf, exp - 1 (steps 1-3)": lambda x: torch.exp(x) - 1,
    "FastExpf, exp - 1, flushed (step 4)": _flushed(lambda x: torch.exp2(x * math.log2(math.e)) - 1),
    "Expm1f (step 5)": torch.expm1,
    "Expm1Poly (steps 6, 7)": _expm1_poly,
}


@pytest.mark.parametrize("formula", sorted(STUDY_FORMULAS))
def test_the_probe_passes_each_study_formula(formula):
    x = ops.probe()
    assert x.dtype == torch.float32 and x.numel() % 2 == 1
    subnormal, large = (x != 0) & (x.abs() < torch.finfo(torch.float32).tiny), x.abs() > 1e38
    for sign in (x.signbit(), ~x.signbit()):  # each kind of input on both sides of zero
        assert all((sign & kind).any() for kind in (x == 0, subnormal, large, x.abs() < 1e-6, x.abs() > 1))
    for alpha in ops.PROBE_ALPHAS:
        y = torch.where(x > 0, x, alpha * STUDY_FORMULAS[formula](x))
        assert ops.mismatch(x, y, alpha) == ""
        if "exp - 1" in formula:  # accepted, though far from F.elu's bits near 0 (relative error)
            near = (x < 0) & (x > -1e-6)
            assert ((y[near].double() - F.elu(x[near].double(), alpha)).abs() > 1e-9).any()


def test_the_probe_refuses_what_is_not_elu_naming_an_input_and_both_values():
    x = ops.probe()
    why = ops.mismatch(x, F.silu(x), 1.0)
    found = re.fullmatch(r"at x = (\S+) \(alpha = 1\) it gives (\S+) where F.elu gives (\S+)", why)
    assert found, why
    xi, got, want = map(float, found.groups())
    assert xi in x.tolist() and abs(got - want) > ATOL + RTOL * abs(want)
    assert got == pytest.approx(F.silu(torch.tensor(xi)).item(), rel=1e-6)
    assert want == pytest.approx(F.elu(torch.tensor(xi, dtype=torch.float64)).item(), rel=1e-8)
    assert ops.mismatch(x, F.elu(x, 1.0), -0.7).startswith("at x = -")  # alpha ignored
    unwritten = F.elu(x, 0.5)
    unwritten[-1] = math.nan  # a vector kernel's tail left unwritten
    assert ops.mismatch(x, unwritten, 0.5) == f"at x = {x[-1]:.9g} (alpha = 0.5) it gives nan where F.elu gives " \
                                             f"{F.elu(x[-1:].double(), 0.5).item():.9g}"


class _Build:
    """A build's face as ``verdict`` sees it: ``elu(x, alpha, out=)`` writing ``fn(x, alpha)`` into out's first
    ``written`` elements, and its spec's source path."""

    def __init__(self, name, fn, written=None):
        self.spec, self.fn, self.written, self.calls = SimpleNamespace(source_path=Path(name)), fn, written, 0

    def elu(self, x, alpha, out):
        self.calls += 1
        out[: self.written].copy_(self.fn(x, alpha)[: self.written])
        return out


def test_a_builds_verdict_names_its_file_an_input_and_both_values_and_is_kept():
    silu = _Build("my/silu.cu", lambda x, alpha: F.silu(x))
    why = ops.verdict(silu, "cpu")
    assert re.fullmatch(r"my/silu\.cu does not compute ELU: at x = \S+ \(alpha = 1\) it gives \S+ where F\.elu gives "
                        r"\S+, beyond the study's tolerance \(atol 0\.0001, rtol 0\.0001\); .*", why), why
    assert ops.verdict(silu, "cpu") == why and silu.calls == 1  # once per build
    tail = _Build("tail.cu", F.elu, written=-1)  # the last element left unwritten (NaN)
    assert "(alpha = 1) it gives nan" in ops.verdict(tail, "cpu")
    fixed_alpha = _Build("one.cu", lambda x, alpha: F.elu(x))
    assert "(alpha = -0.7)" in ops.verdict(fixed_alpha, "cpu")
    elu = _Build("elu.cu", F.elu)
    assert ops.verdict(elu, "cpu") == "" and elu.calls == len(ops.PROBE_ALPHAS)


def test_a_build_first_used_inside_a_cuda_graph_capture_is_refused_before_its_probe(monkeypatch):
    """The probe reads its output back to the host, which a capture forbids: the first use inside one is a clear
    error, not a failed capture; once checked, a build is used inside captures freely."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    capturing = [True]
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: capturing[0])
    monkeypatch.setattr(ops, "verdict", lambda module, device="cuda": "")
    build = _Build("mine.cu", F.elu)
    build.op_namespace = "mine"
    monkeypatch.setattr(ops, "_REGISTERED", {"mine"})  # its operator's Python side is registered already
    with pytest.raises(RuntimeError, match=r"mine\.cu: its build is first used inside a CUDA graph capture"):
        ops.loaded(build)
    capturing[0] = False
    assert ops.loaded(build) is build  # the warm-up call: checked
    capturing[0] = True
    assert ops.loaded(build) is build


# ---------------------------------------------------------------- on the GPU: the kernels


@gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_the_kernels_match_f_elu_and_aten_backward(defaults, dtype):
    x = (torch.randn(4097 * 3 + 1, device="cuda") * 6).to(dtype)
    g = torch.randn_like(x)
    y = ELU(0.5)(x.clone().requires_grad_())
    exact = dtype != torch.float32  # step 7 is bit for bit; step 6's float32 formula is within 2 ulp
    torch.testing.assert_close(y, F.elu(x, 0.5), **({"rtol": 0, "atol": 0} if exact else {}))
    gi = torch.ops.elu_study.elu_backward(g, x, 0.5, False)
    torch.testing.assert_close(gi, torch.ops.aten.elu_backward(g, 0.5, 1, 1, False, x), rtol=0, atol=0)


@gpu
def test_channels_last_runs_one_kernel_and_no_copy(defaults):
    x = torch.randn(8, 16, 32, 32, device="cuda").contiguous(memory_format=torch.channels_last)
    ELU()(x)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        y = ELU()(x)
        torch.cuda.synchronize()
    kernels = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    assert len(kernels) == 1 and "step6" in kernels[0] and y.is_contiguous(memory_format=torch.channels_last)


@gpu
def test_cuda_graph_captures_and_replays_forward_and_backward(defaults):
    x = torch.randn(4096 + 3, device="cuda", requires_grad=True)
    g = torch.randn(4096 + 3, device="cuda")
    model = ELU(0.5)
    for _ in range(2):  # warm-up on a side stream, as torch.cuda.graphs asks
        model(x).backward(g)
    graph = torch.cuda.CUDAGraph()
    x.grad = None
    with torch.cuda.graph(graph):
        y = model(x)
        y.backward(g)
    x.grad.fill_(float("nan"))
    y.detach().fill_(float("nan"))
    graph.replay()
    torch.testing.assert_close(y.detach(), F.elu(x.detach(), 0.5))
    torch.testing.assert_close(x.grad, torch.ops.aten.elu_backward(g, 0.5, 1, 1, False, x.detach()), rtol=0, atol=0)


@gpu
def test_a_kernel_that_is_not_elu_is_refused_before_its_first_call(tmp_path):
    """A user's SiLU compiled as a variant: its first CUDA tensor is refused with one input and both values, every
    later one too (the verdict kept); a CPU tensor still gets F.elu (no kernel runs for it)."""
    silu = tmp_path / "silu.cu"
    silu.write_text((KERNELS_DIR / "1_naive.cu").read_text().replace("elu::Expf{}(x[i], alpha)",
                                                                      "x[i] / (1.0f + expf(-x[i]))"))
    message = r"silu\.cu does not compute ELU: at x = \S+ \(alpha = 1\) it gives \S+ where F\.elu gives \S+"
    for _ in range(2):
        with pytest.raises(ValueError, match=message):
            ELU(variant=silu)(torch.randn(5, device="cuda"))
    x = torch.randn(5)
    torch.testing.assert_close(ELU(variant=silu)(x), F.elu(x), rtol=0, atol=0)


@gpu
@pytest.mark.parametrize("step", sorted(known_variants()))
def test_every_study_step_passes_the_probe(step):
    assert ops.verdict(compile_variant(step)) == ""
