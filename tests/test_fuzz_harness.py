"""The fuzz harness itself, on the CPU: it passes a correct op, each planted fault fails it, its strategies reach
every layout and boundary, and its oracle of the documented rules names the rule a call breaks.

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
import fuzzing as fuzz  # noqa: E402 - the fuzz harness beside the tests (it needs hypothesis, the test extra)
import strategies  # noqa: E402

ELU, BACKWARD = OPS["elu"], OPS["elu_backward"]
CPU, META = torch.device("cpu"), torch.device("meta")
SMALL = 4096  # the CPU's share: lengths up to 4096, and a made-up 4-SM machine's wave boundaries
QUICK = dict(deadline=None, database=None, phases=[Phase.generate], report_multiple_bugs=False,
             suppress_health_check=list(HealthCheck))


def _shape(t):
    return "(" + ",".join(str(s) for s in t.shape) + ("," if t.dim() == 1 else "") + ")"


def _partially_overlap(out, t):
    """binding.cpp's partially_overlap, transcribed: byte spans that meet, unless out is exactly a contiguous t."""
    if not out.numel() or not t.numel():
        return False
    last = lambda v: sum((n - 1) * s for n, s in zip(v.shape, v.stride()))
    span = lambda v: (v.data_ptr(), v.data_ptr() + (last(v) + 1) * v.element_size())
    (o0, o1), (x0, x1) = span(out), span(t)
    return not (o0 == x0 and t.is_contiguous()) and o0 < x1 and x0 < o1


class FakeModule:
    """binding.cpp's elu and elu_backward in PyTorch, on the CPU: its checks in its order; ``fault`` plants one bug."""

    def __init__(self, fault=None):
        self.fault, self.dead = fault, False

    def elu(self, x, alpha=1.0, out=None):
        return self._call(self._elu, x, alpha, out)

    def elu_backward(self, grad_output, x, alpha=1.0, is_result=False, out=None):
        return self._call(self._elu_backward, grad_output, x, alpha, is_result, out)

    def _call(self, fn, *args):
        if self.dead:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        try:
            return fn(*args)
        except (TypeError, ValueError, RuntimeError):
            self.dead = self.fault == "dies after an error"
            raise

    def _check(self, op, inputs, names, alpha, out):
        first, first_name = inputs[0], names[0]
        for t, name in zip(inputs, names):
            if t.device.type != "cpu":
                raise ValueError(f"{op}: {name} must be a CUDA tensor, got one on {t.device}")
            if t.dtype != torch.float32:
                kind = RuntimeError if self.fault == "wrong error type" else TypeError
                raise kind(f"{op}: {name} must be float32, got {t.dtype}")
        if not math.isfinite(alpha) and self.fault != "takes any alpha":
            raise ValueError(f"{op}: alpha must be finite, got {alpha}")
        for t, name in zip(inputs[1:], names[1:]):
            if t.shape != first.shape and self.fault != "skips the shape check":
                raise ValueError(f"{op}: {name} has shape {_shape(t)} but {first_name} has shape {_shape(first)}")
        if out is None:
            return
        if out.device.type != "cpu":
            raise ValueError(f"{op}: out must be a CUDA tensor, got one on {out.device}")
        if out.dtype != torch.float32:
            raise TypeError(f"{op}: out must be float32 like the input, got {out.dtype}")
        if out.shape != first.shape:
            raise ValueError(f"{op}: out has shape {_shape(out)} but {first_name} has shape {_shape(first)}")
        if not out.is_contiguous():
            raise ValueError(f"{op}: out must be contiguous")
        if any(_partially_overlap(out, t) for t in inputs):
            raise RuntimeError(f"{op}: out shares memory with {'an' if len(inputs) > 1 else 'the'} input without being it")

    def _elu(self, x, alpha, out):
        self._check("elu", (x,), ("input",), alpha, out)
        return self._write(F.elu(x.contiguous(), 1.0 if self.fault == "ignores alpha" else alpha), x, out)

    def _elu_backward(self, g, x, alpha, is_result, out):
        self._check("elu_backward", (g, x), ("grad_output", "x"), alpha, out)
        gc, xc = torch.ones_like(g) if self.fault == "ignores grad" else g.contiguous(), x.contiguous()
        # NaN x gives grad, as the CUDA kernels (aten's vectorized CPU path gives NaN)
        return self._write(torch.where(xc.isnan(), gc, torch.ops.aten.elu_backward(gc, alpha, 1, 1, is_result, xc)), g, out)

    def _write(self, result, first, out):
        y = out if out is not None else torch.empty(first.shape)
        n = first.numel()
        kept = n - n % 4 if self.fault == "misses the tail" else n
        y.view(-1)[:kept] = result.reshape(-1)[:kept]
        if self.fault == "overruns" and out is not None:
            y.as_strided((1,), (1,), y.storage_offset() + n).fill_(0.0)
        if self.fault == "writes its input" and out is not first:
            first.as_strided((1,), (1,), first.storage_offset()).fill_(123.0)
        return y


def _run(module, op, bad_calls, examples=150):
    """The fuzz tests' properties, on the CPU: drawn cases, or drawn bad calls each followed by a good one."""
    fn = getattr(module, op.name)
    if bad_calls:
        @settings(max_examples=examples, **QUICK)
        @given(bad=strategies.bad_calls(op=op), follow=st.integers(0, 2**31 - 1))
        def holds(bad, follow):
            fuzz.check_bad_call(fn, bad, "cpu", "meta", op=op)
            fuzz.check_still_works(fn, "cpu", follow, op=op)
    else:
        @settings(max_examples=examples, **QUICK)
        @given(case=strategies.cases(op, strategies.lengths(sm_count=4, max_numel=SMALL), max_numel=SMALL))
        def holds(case):
            fuzz.check_case(fn, op, case, "cpu")
    holds()


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


@pytest.mark.parametrize("bad_calls", [False, True], ids=["cases", "bad calls"])
@pytest.mark.parametrize("op", [ELU, BACKWARD], ids=lambda op: op.name)
def test_a_correct_op_keeps_every_property(op, bad_calls):
    _run(FakeModule(), op, bad_calls)


@pytest.mark.parametrize(
    "fault, op, bad_calls, says",
    [
        ("overruns", ELU, False, r"guard band after (out|in-place x)"),
        ("misses the tail", ELU, False, r"never written|differ from the reference"),
        ("writes its input", ELU, False, r"input x .* changed"),
        ("ignores alpha", ELU, False, r"differ from the reference"),
        ("wrong error type", ELU, True, r"must raise one of .*TypeError.*it raised RuntimeError"),
        ("takes any alpha", ELU, True, r"breaks \['alpha'\](, so it must raise| but returned)"),  # or a later check's error
        ("dies after an error", ELU, True, r"illegal memory access"),
        ("overruns", BACKWARD, False, r"guard band after (out|in-place grad_output)"),
        ("ignores grad", BACKWARD, False, r"differ from the reference"),
        ("skips the shape check", BACKWARD, True, r"breaks \['input shape'\]|must raise one of"),
        ("dies after an error", BACKWARD, True, r"illegal memory access"),
    ],
    ids=lambda v: getattr(v, "name", None),
)
def test_each_planted_fault_fails_its_property(fault, op, bad_calls, says):
    """Up to 2000 examples: a fault of one rule shows only in a call that breaks no other (a few in a hundred)."""
    assert re.search(says, failure(lambda: _run(FakeModule(fault), op, bad_calls, examples=2000)))


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
        places = [strategies.storage_index(shape, layout.strides, 0, i) for i in range(view.numel())]
        # storage_index walks the view as PyTorch does: the buffer holds arange, so the view reads back the places
        positions = torch.arange(buffer.numel(), dtype=torch.float64).as_strided(shape, layout.strides, 0)
        assert positions.flatten().long().tolist() == places
        if kind != "expanded":  # no two elements share memory
            assert len(set(places)) == view.numel()
        for d, stride in enumerate(layout.strides if kind == "expanded" else ()):  # stride 0: every element the first
            if stride == 0:
                assert torch.equal(view, view.narrow(d, 0, 1).expand_as(view))

    holds()


# ---------------------------------------------------------------- the documented refusals


def _calls():
    """(op, inputs, out, alpha, the one rule the call breaks, or None for a good call)."""
    x, base = torch.randn(8), torch.zeros(9)
    rows = [
        (ELU, (x,), None, 1.0, None),
        (ELU, (x.clone(),), "in place", 1.0, None),
        (ELU, (x,), torch.empty(8), -0.5, None),
        (ELU, (base[:0],), base[1:1], 1.0, None),  # empty tensors share nothing
        (ELU, (x.to(META),), None, 1.0, "input device"),
        (ELU, (x.half(),), None, 1.0, "input dtype"),
        (ELU, (x,), None, float("nan"), "alpha"),
        (ELU, (x,), torch.zeros(8, device=META), 1.0, "out device"),
        (ELU, (x,), torch.zeros(8, dtype=torch.float64), 1.0, "out dtype"),
        (ELU, (x,), torch.zeros(9), 1.0, "out shape"),
        (ELU, (x,), torch.zeros(16)[::2], 1.0, "out layout"),
        (ELU, (base[:8],), base[1:], 1.0, "overlap"),
        (ELU, (x[::2],), torch.zeros(4), 1.0, None),  # a strided input is copied, not refused
        (BACKWARD, (x, torch.ones(8)), None, 1.0, None),
        (BACKWARD, (x.clone(), torch.ones(8)), "in place", 1.0, None),
        (BACKWARD, (x, base[:8]), base[:8], 1.0, None),  # out exactly the second input: elementwise, allowed
        (BACKWARD, (x, torch.ones(9)), None, 1.0, "input shape"),
        (BACKWARD, (x, x.to(META)), None, 1.0, "input device"),
        (BACKWARD, (x, x.half()), None, 1.0, "input dtype"),
        (BACKWARD, (x, x), None, float("inf"), "alpha"),
        (BACKWARD, (x, x), torch.zeros(8, dtype=torch.float16), 1.0, "out dtype"),
        (BACKWARD, (x, x), torch.zeros(7), 1.0, "out shape"),
        (BACKWARD, (x, base[:8]), base[1:], 1.0, "overlap"),  # out overlaps the second input
    ]
    return [pytest.param(*row, id=f"{row[0].name}-{row[4] or 'valid'}-{i}") for i, row in enumerate(rows)]


@pytest.mark.parametrize("op, inputs, out, alpha, rule", _calls())
def test_the_oracle_names_the_rule_a_call_breaks_and_only_its_error_matches(op, inputs, out, alpha, rule):
    """violations() flags exactly the broken rule (none for a good call); the binding's error for it matches that
    rule's documented pattern and type and no other rule's; a good call returns PyTorch's values."""
    out = inputs[0] if out == "in place" else out
    assert fuzz.violations(inputs[0], out, alpha, CPU, inputs[1:]) == ({rule} if rule else set())
    call = getattr(FakeModule(), op.name)
    if rule is None:
        expected = op.expected([t.clone() for t in inputs], alpha)
        torch.testing.assert_close(call(*inputs, alpha, out=out), expected)
        return
    with pytest.raises(Exception) as raised:
        call(*inputs, alpha, out=out)
    err = raised.value
    rules = fuzz.rules_for(op)
    matches = {r for r, (kind, pattern) in rules.items() if isinstance(err, kind) and re.search(pattern, str(err))}
    assert matches == {rule}, f"{type(err).__name__}: {err}"


def test_sixteen_bit_storage_is_valid_only_where_a_build_declares_it():
    """Step 6's elu takes float16/bfloat16 (binding = storage16), out then matching the input; others do not."""
    wide = (torch.float32, torch.float16, torch.bfloat16)
    x = torch.randn(8)
    assert fuzz.violations(x.half(), None, 1.0, CPU, dtypes=wide) == set()
    assert fuzz.violations(x.bfloat16(), torch.zeros(8, dtype=torch.bfloat16), 1.0, CPU, dtypes=wide) == set()
    assert fuzz.violations(x.half(), torch.zeros(8), 1.0, CPU, dtypes=wide) == {"out dtype"}  # float32 out, half in
    assert fuzz.violations(x, torch.zeros(8, dtype=torch.half), 1.0, CPU, dtypes=wide) == {"out dtype"}
    assert fuzz.violations(x.half(), None, 1.0, CPU) == {"input dtype"}  # a float32-only build
    assert fuzz.violations(x.double(), None, 1.0, CPU, dtypes=wide) == {"input dtype"}
    assert fuzz.violations(x.half(), None, 1.0, CPU, (x.bfloat16(),), dtypes=wide) == {"input dtype"}  # mixed 16-bit
    step6 = SimpleNamespace(spec=build_spec("6_beyond_copy"))
    step2 = SimpleNamespace(spec=build_spec("2_float4"))
    assert accepted_dtypes(step6, ELU) == wide
    assert accepted_dtypes(step2, ELU) == (torch.float32,)
    assert accepted_dtypes(step6, BACKWARD) == (torch.float32,)
    kind, pattern = fuzz.rules_for(ELU)["out dtype"]
    assert kind is TypeError  # the 16-bit binding's wording: out must have the input's dtype
    assert re.search(pattern, "elu: out must be Half like the input, got Float")
    assert re.search(pattern, "elu: out must be float32 like the input, got BFloat16")


# ---------------------------------------------------------------- the ops the fuzzing knows


def test_every_op_a_build_registers_is_fuzzed():
    """A new op in binding.cpp (a backward pass) needs its OpSpec in elu_study.core.ops before this passes.
    Compiles each kernel file's default build (the compile tests have, earlier in the same run)."""
    for name in known_variants():
        ops = registered_ops(compile_variant(name))
        assert "elu" in ops
        extra = sorted(set(ops) - set(OPS))
        assert not extra, f"{name} registers {extra}: add an OpSpec to elu_study.core.ops.OPS"
