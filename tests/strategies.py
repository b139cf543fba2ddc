"""What the fuzz tests draw (hypothesis strategies): valid calls of a build's ops, and calls that may break any
documented rule of the binding (dtype, device, shape or layout of an input or of ``out``, ``alpha``, overlap).
What every call must keep is ``fuzzing`` beside it. Test-only: it needs ``hypothesis`` (the test extra)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from elu_study.core.ops import OpSpec

MAX_NUMEL = 1 << 22  # "a few million": 16 MiB per float32 buffer
MAX_OFFSET = 7  # storage offsets 0..7 elements: every alignment mod 16 bytes, twice
SPECIALS = (float("nan"), float("inf"), float("-inf"), 0.0, -0.0, 1e-40, -1e-40, 1e-30, -1e-30, -1e-7, -1e-3,
            -88.0, -104.0, 88.0, 3.0e38, -3.0e38)
ALPHA_SPECIALS = (0.0, -0.0, 1.0, -1.0, 0.5, 2.5, 1e-3, -1e-3)
OTHER_DTYPES = (torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64, torch.uint8, torch.bool,
                torch.complex64)


@dataclass(frozen=True)
class Layout:
    """Where an input's elements lie in its buffer: ``buffer.as_strided(shape, strides, fuzz.GUARD + offset)``."""
    kind: str  # contiguous | gaps | permuted | channels_last | expanded
    offset: int
    strides: tuple[int, ...]


@dataclass(frozen=True)
class Values:
    seed: int
    scale: float  # randn times this
    specials: tuple[tuple[int, float], ...]  # (flat index, negative from the end; value) planted over the randn


@dataclass(frozen=True)
class Case:
    shape: tuple[int, ...]
    layouts: tuple[Layout, ...]  # one per tensor input of the op
    values: tuple[Values, ...]
    alpha: float
    out: str  # none | given | in_place
    out_offset: int  # elements past the guard band where a given out starts
    omit_out: bool  # with out "none": leave the argument out rather than pass None
    dtype: torch.dtype = torch.float32  # every tensor's: a 16-bit one where the build's op takes it

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


def contiguous_strides(shape) -> tuple[int, ...]:
    return tuple(math.prod(max(s, 1) for s in shape[i + 1 :]) for i in range(len(shape)))


def extent(shape, strides) -> int:
    """Elements of buffer a strided view spans (0 if it is empty)."""
    return 1 + sum((size - 1) * stride for size, stride in zip(shape, strides)) if math.prod(shape) else 0


def storage_index(shape, strides, start: int, flat: int) -> int:
    """Where the element of row-major index ``flat`` of a strided view lies in its buffer."""
    return start + sum(flat // step % size * stride for size, stride, step in zip(shape, strides, contiguous_strides(shape)))


def lengths(sm_count: int = 132, max_numel: int = MAX_NUMEL) -> st.SearchStrategy[int]:
    """Element counts from 0 to max_numel, biased to tails (n mod 4 != 0) and to block, vector and
    wave boundaries (k * 2^p and k * sm_count * 2^p, each +- 5), where launch shapes change."""
    def near_multiples(unit: int, lowest_power: int) -> st.SearchStrategy[int]:
        top = max(lowest_power, (max_numel // max(unit, 1)).bit_length() - 1)
        multiple = st.integers(lowest_power, top).flatmap(
            lambda p: st.integers(1, max(1, min(12, max_numel // (unit << p)))).map(lambda k: k * (unit << p)))
        return st.tuples(multiple, st.integers(-5, 5)).map(lambda t: min(max(t[0] + t[1], 0), max_numel))

    return st.one_of(st.integers(0, 80), near_multiples(1, 2), near_multiples(sm_count, 3), st.integers(0, max_numel))


@st.composite
def shapes(draw, length_strategy: st.SearchStrategy[int], max_numel: int = MAX_NUMEL):
    """1-D half the time (the length strategy's tails exactly); else 2-D to 4-D with small leading dims."""
    ndim = draw(st.sampled_from((1, 1, 1, 2, 3, 4)))
    lead = draw(st.lists(st.integers(0, 7), min_size=ndim - 1, max_size=ndim - 1))
    return (*lead, min(draw(length_strategy), max_numel // max(math.prod(lead), 1)))


@st.composite
def layouts(draw, shape, contiguous_only: bool = False):
    ndim = len(shape)
    offset = draw(st.integers(0, MAX_OFFSET))
    kinds = ["contiguous"] + ([] if contiguous_only else ["gaps", "permuted", "expanded"] + ["channels_last"] * (ndim == 4))
    kind = draw(st.sampled_from(kinds))
    strides = contiguous_strides(shape)
    if kind == "gaps":  # base[..., ::f] in every dimension: a strided view with holes
        factors = draw(st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim))
        strides = tuple(b * f for b, f in zip(contiguous_strides([s * f for s, f in zip(shape, factors)]), factors))
    elif kind == "permuted":  # base.permute(...): the same elements in another order
        perm = draw(st.permutations(range(ndim)))
        base = dict(zip(perm, contiguous_strides([shape[p] for p in perm])))
        strides = tuple(base[d] for d in range(ndim))
    elif kind == "channels_last":
        n, c, h, w = shape
        strides = (h * w * c, 1, w * c, c)
    elif kind == "expanded":  # broadcast dimensions have stride 0 and share their elements
        broadcast = draw(st.lists(st.booleans(), min_size=ndim, max_size=ndim))
        base = contiguous_strides([1 if b else s for s, b in zip(shape, broadcast)])
        strides = tuple(0 if b else s for s, b in zip(base, broadcast))
    return Layout(kind, offset, strides)


def values() -> st.SearchStrategy[Values]:
    index = st.one_of(st.integers(-4, 3), st.integers(0, 2**31))
    return st.builds(Values, seed=st.integers(0, 2**31 - 1), scale=st.sampled_from((4.0, 4.0, 1.0, 1e-3, 30.0)),
                     specials=st.lists(st.tuples(index, st.sampled_from(SPECIALS)), max_size=6).map(tuple))


def alphas() -> st.SearchStrategy[float]:
    # float32-exact, so the kernel's float and PyTorch's scalar agree; |alpha| <= 8 keeps the exponential's few-ulp error
    # times alpha inside atol.
    return st.one_of(st.sampled_from(ALPHA_SPECIALS), st.floats(-8.0, 8.0, allow_nan=False, width=32))


@st.composite
def cases(draw, op: OpSpec, length_strategy: st.SearchStrategy[int] | None = None, max_numel: int = MAX_NUMEL,
          dtypes: tuple[torch.dtype, ...] = (torch.float32,)):
    shape = draw(shapes(lengths(max_numel=max_numel) if length_strategy is None else length_strategy, max_numel))
    out = draw(st.sampled_from(["none", "given"] + (["in_place"] if op.in_place is not None else [])))
    return Case(shape, layouts=tuple(draw(layouts(shape, contiguous_only=out == "in_place" and i == op.in_place))
                                     for i in range(len(op.inputs))),
                values=tuple(draw(values()) for _ in op.inputs), alpha=draw(alphas()), out=out,
                out_offset=draw(st.integers(0, MAX_OFFSET)), omit_out=draw(st.booleans()),
                dtype=draw(st.sampled_from(dtypes)))


@dataclass(frozen=True)
class OtherInput:  # a second (third, ...) tensor input of a bad call
    dtype: torch.dtype
    device: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class BadCall:
    shape: tuple[int, ...]
    x_dtype: torch.dtype
    x_device: str  # "device" (the kernels'), "foreign" (one they refuse: the CPU), "meta", "other" (a second GPU)
    alpha: float
    out: str  # none | alias | fresh | overlap
    out_dtype: torch.dtype
    out_device: str
    out_shape: tuple[int, ...]
    out_contiguous: bool
    seed: int
    others: tuple[OtherInput, ...] = ()  # the op's inputs after the first (none for elu)


def _other_shapes(shape) -> tuple[tuple[int, ...], ...]:  # one more element, transposed, flattened
    return (*shape[:-1], shape[-1] + 1), tuple(reversed(shape)), (math.prod(shape),)


@st.composite
def bad_calls(draw, devices=("device", "foreign"), op: OpSpec | None = None):
    """A call that may break any rule; ``op`` (default elu) says how many tensor inputs it has. Its further inputs
    are mostly good partners of the first (float32, the kernels' device, the same shape): a rule at a time."""
    shape = draw(st.one_of(st.tuples(st.integers(0, 300)), st.tuples(st.integers(0, 6), st.integers(0, 50))))
    dtypes = st.one_of(st.just(torch.float32), st.sampled_from(OTHER_DTYPES))
    others = tuple(OtherInput(draw(st.one_of(st.just(torch.float32), dtypes)),
                              draw(st.one_of(st.just("device"), st.sampled_from(devices))),
                              draw(st.sampled_from(_other_shapes(shape))) if draw(st.integers(0, 3)) == 0 else shape)
                   for _ in (op.inputs[1:] if op is not None else ()))
    out_shape = draw(st.sampled_from(((*shape[:-1], max(shape[-1] - 1, 0)), *_other_shapes(shape))))
    return BadCall(shape, x_dtype=draw(dtypes), x_device=draw(st.sampled_from(devices)),
                   alpha=draw(st.one_of(alphas(), st.sampled_from((float("nan"), float("inf"), float("-inf"))))),
                   out=draw(st.sampled_from(("none", "alias", "fresh", "fresh", "fresh", "overlap"))),
                   out_dtype=draw(dtypes), out_device=draw(st.sampled_from(devices)),
                   out_shape=out_shape if draw(st.booleans()) else shape,  # another shape half the time
                   out_contiguous=draw(st.booleans()), seed=draw(st.integers(0, 2**31 - 1)), others=others)
