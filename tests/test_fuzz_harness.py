"""The fuzz harness itself, on the CPU: it passes a correct op, and each planted fault fails it.

A fake module keeps binding.cpp's contract in PyTorch, with the CPU standing in for the GPU and the
meta device for a device the kernels refuse; each fault is one a kernel could have (an overrun, a
missed tail, a written input, a wrong alpha, a wrong error, a dead context after an error).
"""

import math
import re
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("hypothesis", reason="the fuzz harness needs hypothesis: pip install -e '.[test]'")

from hypothesis import HealthCheck, Phase, find, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from elu_study.core.build import build_spec, compile_variant, known_variants  # noqa: E402
from elu_study.core.ops import OPS, accepted_dtypes, registered_ops  # noqa: E402
from elu_study.testing import fuzz, strategies  # noqa: E402

ELU = OPS["elu"]
SMALL = 4096  # the CPU's share: lengths up to 4096, and a made-up 4-SM machine's wave boundaries
QUICK = settings(max_examples=150, deadline=None, database=None, phases=[Phase.generate],
                 report_multiple_bugs=False, suppress_health_check=list(HealthCheck))


def _shape(t):
    return "(" + ",".join(str(s) for s in t.shape) + ("," if t.dim() == 1 else "") + ")"


class FakeModule:
    """binding.cpp's elu in PyTorch, on the CPU; ``fault`` plants one bug."""

    def __init__(self, fault=None):
        self.fault = fault
        self.dead = False

    def elu(self, x, alpha=1.0, out=None):
        if self.dead:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        try:
            return self._elu(x, alpha, out)
        except (TypeError, ValueError, RuntimeError):
            if self.fault == "dies after an error":
                self.dead = True
            raise

    def _elu(self, x, alpha, out):
        if x.device.type != "cpu":
            raise ValueError(f"elu: input must be a CUDA tensor, got one on {x.device}")
        if x.dtype != torch.float32:
            kind = RuntimeError if self.fault == "wrong error type" else TypeError
            raise kind(f"elu: input must be float32, got {x.dtype}")
        if not math.isfinite(alpha) and self.fault != "takes any alpha":
            raise ValueError(f"elu: alpha must be finite, got {alpha}")
        if out is not None:
            if out.device.type != "cpu":
                raise ValueError(f"elu: out must be a CUDA tensor, got one on {out.device}")
            if out.dtype != torch.float32:
                raise TypeError(f"elu: out must be float32, got {out.dtype}")
            if out.shape != x.shape:
                raise ValueError(f"elu: out has shape {_shape(out)} but input has shape {_shape(x)}")
            if not out.is_contiguous():
                raise ValueError("elu: out must be contiguous")
            if fuzz.violations(x, out, alpha, torch.device("cpu")) == {"overlap"}:
                raise RuntimeError("elu: out shares memory with the input without being it")
        xc = x.contiguous()
        y = out if out is not None else torch.empty(x.shape)
        n = x.numel()
        if n == 0:
            return y
        result = F.elu(xc, 1.0 if self.fault == "ignores alpha" else alpha).reshape(-1)
        flat = y.view(-1)
        if self.fault == "misses the tail" and n % 4:
            flat[: n - n % 4] = result[: n - n % 4]
        else:
            flat.copy_(result)
        if self.fault == "overruns" and out is not None:
            y.as_strided((1,), (1,), y.storage_offset() + n).fill_(0.0)
        if self.fault == "writes its input" and out is not x:
            x.as_strided((1,), (1,), x.storage_offset()).fill_(123.0)
        return y


    def elu_backward(self, grad_output, x, alpha=1.0, is_result=False, out=None):
        """binding.cpp's elu_backward: the same checks in the same order, then aten's formula."""
        if self.dead:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        try:
            return self._elu_backward(grad_output, x, alpha, is_result, out)
        except (TypeError, ValueError, RuntimeError):
            if self.fault == "dies after an error":
                self.dead = True
            raise

    def _elu_backward(self, g, x, alpha, is_result, out):
        for t, name in ((g, "grad_output"), (x, "x")):
            if t.device.type != "cpu":
                raise ValueError(f"elu_backward: {name} must be a CUDA tensor, got one on {t.device}")
            if t.dtype != torch.float32:
                raise TypeError(f"elu_backward: {name} must be float32, got {t.dtype}")
        if not math.isfinite(alpha):
            raise ValueError(f"elu_backward: alpha must be finite, got {alpha}")
        if x.shape != g.shape and self.fault != "skips the shape check":
            raise ValueError(f"elu_backward: x has shape {_shape(x)} but grad_output has shape {_shape(g)}")
        if out is not None:
            if out.device.type != "cpu":
                raise ValueError(f"elu_backward: out must be a CUDA tensor, got one on {out.device}")
            if out.dtype != torch.float32:
                raise TypeError(f"elu_backward: out must be float32 like the inputs, got {out.dtype}")
            if out.shape != g.shape:
                raise ValueError(f"elu_backward: out has shape {_shape(out)} but grad_output has shape {_shape(g)}")
            if not out.is_contiguous():
                raise ValueError("elu_backward: out must be contiguous")
            if fuzz.violations(g, out, alpha, torch.device("cpu"), (x,)) == {"overlap"}:
                raise RuntimeError("elu_backward: out shares memory with an input without being it")
        gc = torch.ones_like(g) if self.fault == "ignores grad" else g.contiguous()
        xc = x.contiguous()  # NaN x gives grad, as the CUDA kernels (aten's vectorized CPU path gives NaN)
        result = torch.where(xc.isnan(), gc, torch.ops.aten.elu_backward(gc, alpha, 1, 1, is_result, xc))
        y = out if out is not None else torch.empty(g.shape)
        if g.numel():
            y.view(-1).copy_(result.reshape(-1))
        if self.fault == "overruns" and out is not None:
            y.as_strided((1,), (1,), y.storage_offset() + g.numel()).fill_(0.0)
        return y


BACKWARD = OPS["elu_backward"]


def _run_backward(module, max_numel=SMALL):
    @QUICK
    @given(case=strategies.cases(BACKWARD, strategies.lengths(sm_count=4, max_numel=max_numel), max_numel=max_numel))
    def holds(case):
        fuzz.check_case(module.elu_backward, BACKWARD, case, "cpu")

    holds()


def _run_backward_bad_calls(module):
    @QUICK
    @given(bad=strategies.bad_calls(op=BACKWARD), follow=st.integers(0, 2**31 - 1))
    def holds(bad, follow):
        fuzz.check_bad_call(module.elu_backward, bad, "cpu", "meta", op=BACKWARD)
        fuzz.check_still_works(module.elu_backward, "cpu", follow, op=BACKWARD)

    holds()


def _run_forward(module, max_numel=SMALL):
    @QUICK
    @given(case=strategies.cases(ELU, strategies.lengths(sm_count=4, max_numel=max_numel), max_numel=max_numel))
    def holds(case):
        fuzz.check_case(module.elu, ELU, case, "cpu")

    holds()


def _run_bad_calls(module):
    @QUICK
    @given(bad=strategies.bad_calls(), follow=st.integers(0, 2**31 - 1))
    def holds(bad, follow):
        fuzz.check_bad_call(module.elu, bad, "cpu", "meta")
        fuzz.check_still_works(module.elu, "cpu", follow)

    holds()


def test_a_correct_op_keeps_every_property():
    _run_forward(FakeModule())
    _run_bad_calls(FakeModule())


def test_a_correct_backward_keeps_every_property():
    _run_backward(FakeModule())
    _run_backward_bad_calls(FakeModule())


@pytest.mark.parametrize(
    "fault, run, says",
    [
        ("overruns", _run_backward, r"guard band after (out|in-place grad_output)"),
        ("ignores grad", _run_backward, r"differ from the reference"),
        ("skips the shape check", _run_backward_bad_calls, r"breaks \['input shape'\]|must raise one of"),
        ("dies after an error", _run_backward_bad_calls, r"illegal memory access"),
    ],
)
def test_each_planted_backward_fault_fails_its_property(fault, run, says):
    assert re.search(says, failure(lambda: run(FakeModule(fault))))


def failure(run) -> str:
    """What a failing property run says: its error, or each error of a group (hypothesis groups a
    failure that changed on replay, as a dead context makes it)."""
    try:
        run()
    except BaseException as err:  # noqa: BLE001
        parts, todo = [], [err]
        while todo:
            e = todo.pop()
            parts.append(f"{type(e).__name__}: {e}")
            todo += list(getattr(e, "exceptions", ())) + [c for c in (e.__cause__,) if c is not None]
        return "\n".join(parts)
    raise AssertionError("the property held: the planted fault went unseen")


@pytest.mark.parametrize(
    "fault, says",
    [
        ("overruns", r"guard band after (out|in-place x)"),
        ("misses the tail", r"never written|differ from the reference"),
        ("writes its input", r"input x .* changed"),
        ("ignores alpha", r"differ from the reference"),
    ],
)
def test_each_planted_fault_fails_the_forward_property(fault, says):
    assert re.search(says, failure(lambda: _run_forward(FakeModule(fault))))


@pytest.mark.parametrize(
    "fault, says",
    [
        ("wrong error type", r"must raise one of .*TypeError.*it raised RuntimeError"),
        ("takes any alpha", r"breaks \['alpha'\] but returned"),
        ("dies after an error", r"illegal memory access"),
    ],
)
def test_each_planted_fault_fails_the_bad_call_property(fault, says):
    assert re.search(says, failure(lambda: _run_bad_calls(FakeModule(fault))))


# ---------------------------------------------------------------- what the strategies reach


WAVE = 132 * 256
FIND = settings(max_examples=5000, database=None, phases=[Phase.generate])  # the first one found will do


@pytest.mark.parametrize(
    "what, condition",
    [
        ("empty", lambda n: n == 0),
        ("a tail of 3 after a 1024-element block", lambda n: n > 1024 and n % 1024 == 3),
        ("one short of a block", lambda n: n > 256 and n % 256 == 255),
        ("past a million, with a tail", lambda n: n > 1_000_000 and n % 4 != 0),
        ("beside a 132-SM wave of 256-element blocks",
         lambda n: n > WAVE and abs(n - round(n / WAVE) * WAVE) <= 5 and n % 4),
    ],
)
def test_lengths_reach_tails_and_boundaries(what, condition):
    assert condition(find(strategies.lengths(), condition, settings=FIND))


@given(n=strategies.lengths(sm_count=4, max_numel=5000))
@settings(max_examples=300, database=None, deadline=None)
def test_lengths_stay_in_range(n):
    assert 0 <= n <= 5000


@pytest.mark.parametrize(
    "what, condition",
    [
        ("in place on a misaligned view", lambda c: c.out == "in_place" and c.layouts[0].offset % 4 and c.numel > 4),
        ("misaligned out, aligned input", lambda c: c.out == "given" and c.out_offset % 4 and c.layouts[0].offset % 4 == 0),
        ("channels-last input", lambda c: c.layouts[0].kind == "channels_last" and c.numel > 1),
        ("expanded input into out", lambda c: c.layouts[0].kind == "expanded" and 0 in c.layouts[0].strides
         and c.numel > 1 and c.out == "given"),
        ("permuted input", lambda c: c.layouts[0].kind == "permuted" and len(c.shape) >= 3 and c.numel > 1),
        ("negative alpha", lambda c: c.alpha < 0),
        ("alpha 0", lambda c: c.alpha == 0),
        ("a NaN planted", lambda c: any(math.isnan(v) for _, v in c.values[0].specials)),
        ("out argument left out", lambda c: c.out == "none" and c.omit_out),
    ],
)
def test_cases_reach_every_layout_and_output(what, condition):
    assert condition(find(strategies.cases(ELU, max_numel=SMALL), condition, settings=FIND))


@pytest.mark.parametrize("kind", ["contiguous", "gaps", "permuted", "channels_last", "expanded"])
def test_layouts_describe_the_views_they_name(kind):
    """as_strided with the drawn strides gives the view the kind names, inside its buffer."""

    @given(data=st.data())
    @settings(max_examples=50, database=None, deadline=None)
    def holds(data):
        shape = data.draw(st.lists(st.integers(0, 5), min_size=4, max_size=4).map(tuple))
        layout = data.draw(strategies.layouts(shape).filter(lambda lay: lay.kind == kind))
        buffer, view = fuzz.make_input(shape, layout, strategies.Values(0, 1.0, ()), "cpu")
        assert view.shape == shape
        assert buffer.numel() == 2 * fuzz.GUARD + layout.offset + strategies.extent(shape, layout.strides)
        if math.prod(shape) == 0:
            return
        if kind == "contiguous":
            assert view.is_contiguous()
        if kind == "channels_last":
            assert view.is_contiguous(memory_format=torch.channels_last)
        if kind in ("gaps", "permuted", "channels_last", "contiguous"):  # no two elements share memory
            places = {strategies.storage_index(shape, layout.strides, 0, i) for i in range(view.numel())}
            assert len(places) == view.numel()
        if kind == "expanded":  # along a stride-0 dimension every element is the first one
            for d, stride in enumerate(layout.strides):
                if stride == 0:
                    assert torch.equal(view, view.narrow(d, 0, 1).expand_as(view))

    holds()


# ---------------------------------------------------------------- the documented refusals


def test_violations_name_every_rule_a_call_breaks():
    cpu, meta = torch.device("cpu"), torch.device("meta")
    x = torch.zeros(8)
    assert fuzz.violations(x, None, 1.0, cpu) == set()
    assert fuzz.violations(x, x, 1.0, cpu) == set()  # in place
    assert fuzz.violations(x.half().to(meta), None, float("nan"), cpu) == {"input device", "input dtype", "alpha"}
    assert fuzz.violations(x, torch.zeros(9, dtype=torch.float64), 1.0, cpu) == {"out shape", "out dtype"}
    assert fuzz.violations(x, torch.zeros(16)[::2], 1.0, cpu) == {"out layout"}
    assert fuzz.violations(x, torch.zeros(8, device=meta), 1.0, cpu) == {"out device"}
    base = torch.zeros(9)
    assert fuzz.violations(base[:8], base[1:], 1.0, cpu) == {"overlap"}
    assert fuzz.violations(base[:0], base[1:1], 1.0, cpu) == set()  # empty tensors share nothing


def test_violations_of_an_op_with_two_inputs():
    cpu, meta = torch.device("cpu"), torch.device("meta")
    g, x = torch.zeros(8), torch.ones(8)
    assert fuzz.violations(g, None, 1.0, cpu, (x,)) == set()
    assert fuzz.violations(g, x, 1.0, cpu, (x,)) == set()  # out exactly the second input: elementwise, allowed
    assert fuzz.violations(g, None, 1.0, cpu, (torch.ones(9),)) == {"input shape"}
    assert fuzz.violations(g, None, 1.0, cpu, (x.half().to(meta),)) == {"input device", "input dtype"}
    base = torch.zeros(9)
    assert fuzz.violations(g, base[1:], 1.0, cpu, (base[:8],)) == {"overlap"}  # out overlaps the second input
    rules = fuzz.rules_for(OPS["elu_backward"])
    assert re.search(rules["input shape"][1], "elu_backward: x has shape (9,) but grad_output has shape (8,)")
    assert re.search(rules["overlap"][1], "elu_backward: out shares memory with an input without being it")
    assert fuzz.rules_for(OPS["elu"]) == fuzz.RULES


def test_every_rule_has_a_documented_error():
    for rule, (kind, pattern) in fuzz.RULES.items():
        assert issubclass(kind, Exception) and pattern.startswith("elu: "), rule
    assert re.search(fuzz.RULES["out shape"][1], "elu: out has shape (65,) but input has shape (64,)")


# ---------------------------------------------------------------- the ops the fuzzing knows


def test_every_op_a_build_registers_is_fuzzed():
    """A new op in binding.cpp (a backward pass) needs its OpSpec in elu_study.core.ops before this passes.
    Compiles each kernel file's default build (the compile tests have, earlier in the same run)."""
    for name in known_variants():
        ops = registered_ops(compile_variant(name))
        assert "elu" in ops
        extra = sorted(set(ops) - set(OPS))
        assert not extra, f"{name} registers {extra}: add an OpSpec to elu_study.core.ops.OPS"


def test_sixteen_bit_storage_is_valid_only_where_a_build_declares_it():
    """Step 6's elu takes float16/bfloat16 (binding = storage16), out then matching the input; others do not."""
    cpu = torch.device("cpu")
    wide = (torch.float32, torch.float16, torch.bfloat16)
    x = torch.randn(8)
    assert fuzz.violations(x.half(), None, 1.0, cpu, dtypes=wide) == set()
    assert fuzz.violations(x.bfloat16(), torch.zeros(8, dtype=torch.bfloat16), 1.0, cpu, dtypes=wide) == set()
    assert fuzz.violations(x.half(), torch.zeros(8), 1.0, cpu, dtypes=wide) == {"out dtype"}  # float32 out, half in
    assert fuzz.violations(x, torch.zeros(8, dtype=torch.half), 1.0, cpu, dtypes=wide) == {"out dtype"}
    assert fuzz.violations(x.half(), None, 1.0, cpu) == {"input dtype"}  # a float32-only build
    assert fuzz.violations(x.double(), None, 1.0, cpu, dtypes=wide) == {"input dtype"}
    step6 = SimpleNamespace(spec=build_spec("6_beyond_copy"))
    step2 = SimpleNamespace(spec=build_spec("2_float4"))
    assert accepted_dtypes(step6, OPS["elu"]) == wide
    assert accepted_dtypes(step2, OPS["elu"]) == (torch.float32,)
    assert accepted_dtypes(step6, OPS["elu_backward"]) == (torch.float32,)
    pattern = fuzz.RULES["out dtype"][1]
    assert re.search(pattern, "elu: out must be Half like the input, got Float")
    assert re.search(pattern, "elu: out must be float32 like the input, got BFloat16")
