"""The entry catalogue: every row the study can measure (steps, ablations, baselines, peers, step 6's
attempts), what each one builds, and which question it answers. Data only: checking and timing
entries is the harness's job (elu_study.core.harness).
"""

from __future__ import annotations

from dataclasses import dataclass

from elu_study.core.build import compile_variant, known_variants

ALPHA = 1.0


@dataclass(frozen=True)
class Entry:
    """One row of the study: a step (a kernel build), an ablation of one, or a baseline."""

    name: str
    kind: str  # "baseline", "step", "peer" or "ablation"
    what: str
    variant: str | None = None
    flags: tuple[str, ...] = ()
    checked: bool = True  # copies compute no ELU
    group: str = ""  # the question an ablation answers (see GROUPS)
    base: str | None = None  # the entry this one differs from by exactly one change
    mode: str = ""  # how the build is called: "" (out=y, float32), "in_place" (out=x), "bfloat16", "float16"

    def build(self):
        return compile_variant(self.variant, extra_cuda_cflags=list(self.flags))


def _grid(name: str, what: str, *flags: str, group: str, base: str | None = None, kind: str = "ablation") -> Entry:
    return Entry(name, kind, what, "3_grid_stride", tuple(flags), group=group, base=base)


# Step 5's file with step 2's four choices, then each of step 5's changes alone.
_STEP2_CHOICES = {"OP": "Expf", "THREADS": "256", "VECS": "1", "HINTS": "0"}


def _from_step2(name: str, what: str, **change: str) -> Entry:
    knobs = {**_STEP2_CHOICES, **change}
    flags = tuple(f"-DELU_STREAMING_{k}={v}" for k, v in knobs.items())
    return Entry(name, "ablation", what, "5_streaming", flags, group="step5_one_change",
                 base="5_as_step_2" if change else "2_float4")


GROUPS = {
    "grid_waves": "grid-stride: how many whole waves (one change: the grid size)",
    "grid_one_change": "grid-stride at 2 whole waves: one change each",
    "step5_one_change": "step 2 plus one of step 5's changes",
    "step5_formula": "step 5 with step 2's formula",
    "step6_one_change": "step 6's file: one change each from 6_base",
    "step6_in_place": "in place (out=x)",
    "step6_bfloat16": "bfloat16 storage",
    "step6_float16": "float16 storage",
    "step7_bfloat16": "step 7: bfloat16 at its own roof, one change each from 7_sixteen_bits",
    "step7_float16": "step 7: float16 at its own roof, one change each from 7_sixteen_bits",
}

BASELINES = (
    Entry("copy_", "baseline", "y.copy_(x): the same bytes, no math (the measured roof)", checked=False),
    Entry("copy_kernel", "baseline", "step 2's kernel with no math: the roof as a kernel ncu can profile",
          "2_float4", ("-DELU_FLOAT4_OP=Copy",), checked=False),
    Entry("F.elu", "baseline", "PyTorch's ELU (the op being replaced)"),
    Entry("torch.compile(F.elu)", "baseline", "Inductor's generated Triton kernel"),
    Entry("F.elu_", "baseline", "PyTorch's ELU in place (timed on a buffer of its own)"),
    # The two halves of a read+write stream, run apart: their sum is the measured floor (stream_floor_ms).
    Entry("read_only", "baseline", "x.sum(): the input's bytes read, nothing written (half a stream)", checked=False),
    Entry("write_only", "baseline", "y.zero_(): the output's bytes written, nothing read (half a stream)",
          checked=False),
)
# What a user would reach for instead of writing the kernel: the same checks and timing as the steps.
PEERS = (
    Entry("triton", "peer", "Triton, as the tutorials write it: autotuned BLOCK_SIZE x num_warps, tl.exp"),
    Entry("cub_transform", "peer", "cub::DeviceTransform::Transform (CCCL) with step 2's formula (expf)",
          "peers/cub_transform"),
)
STEPS = (
    Entry("1_naive", "step", "scalar, 1 element/thread, 256 threads, expf", "1_naive"),
    Entry("2_float4", "step", "float4, 1 vector/thread, 256 threads, expf", "2_float4"),
    Entry("3_grid_stride", "step", "float4 grid-stride, 1152 x 512 (the seed's launch)", "3_grid_stride"),
    _grid("3_grid_stride_2_waves", "float4 grid-stride, 2 whole waves x 512", "-DELU_GRID_WAVES=2",
          group="grid_waves", kind="step"),
    Entry("4_fast_math", "step", "step 2 with __expf, --use_fast_math", "4_fast_math"),
    Entry("5_streaming", "step", "2 float4/thread, 128 threads, __ldcs/__stcs, expm1f", "5_streaming"),
    Entry("6_beyond_copy", "step", "step 2 with 128-thread blocks and L2 evict_last loads, plus a 16-bit path",
          "6_beyond_copy"),
)
ABLATIONS = (
    *(_grid(f"3_grid_stride_{w}_waves", f"float4 grid-stride, {w} whole wave(s) x 512", f"-DELU_GRID_WAVES={w}",
            group="grid_waves", base="3_grid_stride_2_waves") for w in (1, 8, 64, 512)),
    _grid("3_grid_stride_one_shot", "grid-stride kernel, one vector per thread (no loop), x 512",
          "-DELU_GRID_WAVES=-1", group="grid_waves", base="3_grid_stride_2_waves"),
    _grid("3_grid_stride_2_waves_256t", "2 whole waves of 256-thread blocks (same threads resident)",
          "-DELU_GRID_WAVES=2", "-DELU_GRID_THREADS=256", group="grid_one_change", base="3_grid_stride_2_waves"),
    _grid("3_grid_stride_2_waves_unroll_1", "2 whole waves x 512, loop not unrolled (one load in flight)",
          "-DELU_GRID_WAVES=2", "-DELU_GRID_UNROLL=1", group="grid_one_change", base="3_grid_stride_2_waves"),
    _from_step2("5_as_step_2", "step 5's file with all of step 2's choices (control: should equal step 2)"),
    _from_step2("2+128_threads", "step 2 with 128-thread blocks", THREADS="128"),
    _from_step2("2+2_vectors", "step 2 with 2 float4 per thread", VECS="2"),
    _from_step2("2+4_vectors", "step 2 with 4 float4 per thread", VECS="4"),
    _from_step2("2+hints", "step 2 with __ldcs/__stcs", HINTS="1"),
    _from_step2("2+expm1f", "step 2 with expm1f", OP="Expm1f"),
    Entry("5_streaming_expf", "ablation", "step 5 with expf instead of expm1f", "5_streaming",
          ("-DELU_STREAMING_OP=Expf",), group="step5_formula", base="5_streaming"),
)
# Step 6's experiments (notebook 08, `python -m elu_study beyond`): each attempt sets every knob of
# kernels/6_beyond_copy.cu explicitly and differs from 6_base by one, so the file's defaults (step 6) can
# move without changing what an attempt means.
_STEP6_BASE = {"THREADS": "128", "VECS": "1", "LOAD": "0", "STORE": "0", "ORDER": "0", "OP": "Expf", "OP16": "Expm1f"}


_KNOBS = {"6_base": _STEP6_BASE}  # each attempt's knobs, by name: what a later attempt changes one of


def _attempt(name: str, what: str, base: str = "6_base", **change: str) -> Entry:
    knobs = _KNOBS[name] = {**_KNOBS[base], **change}
    return Entry(name, "attempt", what, "6_beyond_copy", tuple(f"-DELU6_{k}={v}" for k, v in knobs.items()),
                 group="step6_one_change", base=base if change else "2+128_threads")


STEP6_DEFAULT = "6_load_evict_last"  # the attempt whose knobs became step 6's defaults; round 2 changes one from it


def _mode(name: str, what: str, of: str, mode: str, checked: bool = True) -> Entry:
    e = _BUILT[of]
    return Entry(name, "attempt", what, e.variant, e.flags, checked=checked, group=f"step6_{mode}", base=of, mode=mode)


_ATTEMPT_BUILDS = (
    _attempt("6_base", "step 6's file: 128 threads, 1 vector, plain loads and stores, expf (control)"),
    _attempt("6_64_threads", "64-thread blocks", THREADS="64"),
    _attempt("6_256_threads", "256-thread blocks (step 2's)", THREADS="256"),
    _attempt("6_2_vectors", "2 vectors per thread, both loaded before either store", VECS="2"),
    _attempt("6_load_cs", "loads ld.global.cs (__ldcs: evict-first streaming)", LOAD="1"),
    _attempt("6_load_evict_first", "loads with an L2 evict_first policy (createpolicy)", LOAD="2"),
    _attempt("6_load_evict_last", "loads with an L2 evict_last policy", LOAD="3"),
    _attempt("6_load_no_allocate", "loads ld.global.L1::no_allocate", LOAD="4"),
    _attempt("6_store_cs", "stores st.global.cs (__stcs)", STORE="1"),
    _attempt("6_store_evict_first", "stores with an L2 evict_first policy: dirty lines leave L2 first", STORE="2"),
    _attempt("6_store_evict_last", "stores with an L2 evict_last policy: dirty lines stay in L2 longest", STORE="3"),
    _attempt("6_store_no_allocate", "stores st.global.L1::no_allocate", STORE="4"),
    _attempt("6_reversed", "blocks take tiles from the end: the traversal runs backwards", ORDER="1"),
    _attempt("6_two_streams", "even blocks in the front half, odd in the back: two streams 3.2 GB apart", ORDER="2"),
    _attempt("6_persistent_16", "persistent grid, 16 blocks per SM, each one contiguous run of tiles", ORDER="3"),
    _attempt("6_persistent_4", "persistent grid, 4 blocks per SM, each one contiguous run of tiles", ORDER="3",
             BLOCKS_PER_SM="4"),
    _attempt("6_expm1f", "expm1f (PyTorch's formula) instead of expf - 1", OP="Expm1f"),
    _attempt("6_expm1f_2_vectors", "expm1f with 2 vectors per thread (two changes: more work in flight per thread)",
             OP="Expm1f", VECS="2"),
    _attempt("6_16bit_expf", "the 16-bit path with expf - 1 instead of expm1f (float32 path unchanged)", OP16="Expf"),
    # Round 2: one change each from the new default (loads with L2 evict_last), toward the two-stream floor.
    _attempt("6_evict_last_2_vectors", "evict_last loads, 2 vectors per thread", STEP6_DEFAULT, VECS="2"),
    _attempt("6_evict_last_64_threads", "evict_last loads, 64-thread blocks", STEP6_DEFAULT, THREADS="64"),
    _attempt("6_evict_last_store_cs", "evict_last loads, stores st.global.cs", STEP6_DEFAULT, STORE="1"),
    _attempt("6_evict_last_reversed", "evict_last loads, tiles taken from the end", STEP6_DEFAULT, ORDER="1"),
)
_BUILT = {e.name: e for e in (*STEPS, *_ATTEMPT_BUILDS)}  # the builds _mode calls another way
# Step 6 called other ways: in place (the same bytes, no new allocation) and with 16-bit storage (half the bytes).
ATTEMPTS = (
    *_ATTEMPT_BUILDS,
    _mode("6_beyond_copy in place", "step 6 with out=x: the same bytes, no allocation", "6_beyond_copy", "in_place"),
    _mode("2_float4 in place", "step 2 with out=x (control for in place)", "2_float4", "in_place"),
    _mode("6_beyond_copy bfloat16", "step 6 on bfloat16 storage, math in float32: half the bytes", "6_beyond_copy",
          "bfloat16", checked=False),
    _mode("6_beyond_copy float16", "step 6 on float16 storage, math in float32: half the bytes", "6_beyond_copy",
          "float16", checked=False),
    _mode("6_16bit_expf bfloat16", "step 6 on bfloat16 with expf - 1: fewer instructions per element",
          "6_16bit_expf", "bfloat16", checked=False),
    Entry("F.elu bfloat16", "attempt", "F.elu on bfloat16 (PyTorch computes in float32, rounds once)",
          checked=False, group="step6_bfloat16", mode="bfloat16"),
    Entry("F.elu float16", "attempt", "F.elu on float16", checked=False, group="step6_float16", mode="float16"),
    Entry("copy_ bfloat16", "attempt", "y.copy_(x) of bfloat16: the roof for 16-bit storage", checked=False,
          group="step6_bfloat16", mode="bfloat16"),
)
# Step 7 (notebook 12, `python -m elu_study sixteen`): 16-bit storage at its own roof, bit for bit F.elu.
# Each build sets every knob of kernels/7_sixteen_bits.cu and differs from the file's defaults by one.
_STEP7_BASE = {"CHECK": "1", "FORMULA": "Auto", "LOAD": "1"}
_STEP7_BUILDS = {  # name: (what, knobs changed, the entry it changes from: 7_sixteen_bits if None)
    "7_sixteen_bits": ("expm1f looked up: a table of every 16-bit value where expm1f is neither x nor -1, computed "
                       "once per device and copied into shared memory by each block of a many-block grid; exact for "
                       "every alpha by construction",
                       {}, None),
    "7_poly": ("the first step 7: a fast expm1 (a polynomial near 0, one MUFU.EX2 below), checked, expm1f where the "
               "check asks. bfloat16: Lean (degree 3 to 3/64, eps 2^-16); float16: Mid (degree 6 to 1/4, eps 2^-19)",
               {"FORMULA": "Poly"}, None),
    "7_lean": ("Lean on both dtypes (float16 at eps 2^-16)", {"FORMULA": "Lean"}, None),
    "7_lean4": ("Lean4 on both: degree 4 to 1/8, eps 2^-17", {"FORMULA": "Lean4"}, None),
    "7_mid": ("Mid on both: degree 6 to 1/4, eps 2^-19", {"FORMULA": "Mid"}, None),
    "7_accurate": ("degree 7 to ln(2)/2 and log2(e) split in two: delta 2^-21.7, twice the instructions",
                   {"FORMULA": "Accurate"}, None),
    "7_exact": ("expm1f for every element (step 6's 16-bit formula): the control", {"CHECK": "0"}, None),
    "7_unchecked": ("7_poly with no check: NOT bit-exact; what the check costs", {"FORMULA": "Poly", "CHECK": "2"},
                    "7_poly"),
    "7_plain_loads": ("plain loads instead of L2 evict_last", {"LOAD": "0"}, None),
    "7_persistent": ("the table's first launch: a persistent grid (as many blocks as fit at once, each looping over "
                     "tiles) instead of many short-lived blocks", {"BF16_TILES": "0", "FP16_TILES": "0"}, None),
    "7_block_fill": ("each block computes its table with expm1f instead of copying the device's global one",
                     {"FILL": "0"}, None),
}


def _step7(name: str, what: str, change: dict, base: str | None, mode: str) -> Entry:
    knobs = {**_STEP7_BASE, **change}
    return Entry(f"{name} {mode}", "attempt", what, "7_sixteen_bits", tuple(f"-DELU7_{k}={v}" for k, v in knobs.items()),
                 checked=False, group=f"step7_{mode}", base=None if not change else f"{base or '7_sixteen_bits'} {mode}",
                 mode=mode)


def _step7_rows(mode: str) -> tuple[Entry, ...]:
    """One dtype's step 7 rows: the builds, the roofs (copy_; torch.add's three streams for the backward), PyTorch's
    own forward and backward, and the peers (torch.compile, Triton, CUB)."""
    group = f"step7_{mode}"
    own = tuple(_step7(name, what, change, base, mode) for name, (what, change, base) in _STEP7_BUILDS.items())
    return (*own,
            Entry(f"7_backward {mode}", "attempt", "step 7's backward: grad * alpha * expf(x), expf(x) looked up the "
                  "same way", "7_sixteen_bits", tuple(f"-DELU7_{k}={v}" for k, v in _STEP7_BASE.items()),
                  checked=False, group=group, mode=mode),
            Entry(f"aten.elu_backward {mode}", "attempt", f"PyTorch's elu_backward on {mode}", checked=False,
                  group=group, mode=mode),
            Entry(f"torch.add {mode}", "attempt", f"torch.add(a, b, out=c) of {mode}: two reads and a write, the "
                  "backward's roof", checked=False, group=group, mode=mode),
            Entry(f"torch.compile(F.elu) {mode}", "attempt", f"Inductor's kernel on {mode}", checked=False,
                  group=group, mode=mode),
            Entry(f"triton {mode}", "attempt", f"the Triton peer on {mode}: float32 math, libdevice expm1, one rounding",
                  checked=False, group=group, mode=mode),
            Entry(f"cub_transform {mode}", "attempt", f"cub::DeviceTransform on {mode} with PyTorch's formula (expm1f)",
                  "peers/cub_transform", checked=False, group=group, mode=mode))


STEP7 = (
    *_step7_rows("bfloat16"),
    *_step7_rows("float16"),
    Entry("copy_ float16", "attempt", "y.copy_(x) of float16: the roof for float16 storage", checked=False,
          group="step7_float16", mode="float16"),
)
# The float32 backward (grad and x in, grad_input out: three streams) against its own roof, torch.add; the study's
# kernel is kernels/common/backward.cu, in every build (here step 6's); two attempts, one change each.
_BACKWARD32 = ("6_beyond_copy", "kernels/common/backward.cu, float4, 256 threads: in every build, here step 6's")
BACKWARD = (
    Entry("torch.add", "backward", "torch.add(x, g, out=c) of float32: two reads and a write, the backward's roof",
          checked=False),
    Entry("aten.elu_backward", "backward", "PyTorch's elu_backward on float32 (what autograd of F.elu runs)",
          checked=False),
    Entry("elu_backward", "backward", f"the study's backward: {_BACKWARD32[1]}", _BACKWARD32[0], checked=False),
    Entry("elu_backward_evict_last", "backward", "one change: grad and x loaded with an L2 evict_last policy",
          _BACKWARD32[0], ("-DELU_BWD_LOAD=3",), checked=False, base="elu_backward"),
    Entry("elu_backward_128_threads", "backward", "one change: 128-thread blocks", _BACKWARD32[0],
          ("-DELU_BWD_THREADS=128",), checked=False, base="elu_backward"),
)
# Step 7's rows the main record holds (each against its own dtype's roof): the roofs, PyTorch, the peers, the step.
SIXTEEN_IN_STUDY = ("copy_", "F.elu", "torch.compile(F.elu)", "triton", "cub_transform", "7_sixteen_bits",
                    "torch.add", "aten.elu_backward", "7_backward")
DTYPES16 = ("bfloat16", "float16")
# The float32 builds that measure the fast formulas' distance to expm1f (delta): alpha = 1 returns fast(x).
STEP7_DELTA_BUILDS = {formula: ("7_sixteen_bits", ("-DELU7_OP=Approx", f"-DELU7_FORMULA={formula}"))
                      for formula in ("Lean", "Lean4", "Mid", "Accurate")}
_ALL = (*BASELINES, *STEPS, *PEERS, *ABLATIONS, *ATTEMPTS, *STEP7, *BACKWARD)
ENTRIES = {e.name: e for e in _ALL}
if len(ENTRIES) != len(_ALL):
    raise ValueError("elu_study.study: entry names must be unique")
for _e in _ALL:
    if _e.base is not None and _e.base not in ENTRIES:
        raise ValueError(f"elu_study.study: {_e.name}'s base {_e.base!r} is not an entry")
KINDS = ("baseline", "step", "peer", "ablation")  # the main study's rows; "attempt" rows are step 6's record
# The halves of a read+write stream whose summed medians are the measured floor (see annotate).
STREAM_HALVES = ("read_only", "write_only")


def study_entries() -> list[Entry]:
    """The main study's rows (``python -m elu_study``): the float32 steps, ablations, baselines and peers, the
    backward rows, and step 7's main rows on each 16-bit dtype (not step 6's or step 7's other attempts)."""
    sixteen = [ENTRIES[f"{name} {dtype}"] for dtype in DTYPES16 for name in SIXTEEN_IN_STUDY]
    return [e for e in ENTRIES.values() if e.kind in KINDS] + list(BACKWARD) + sixteen


def profiled_entries() -> list[Entry]:
    """The entries ``python -m elu_study profile`` reads counters of by default: the float32 forward rows that
    launch a kernel (copy_ is a driver copy). Step 7's kernels have theirs in step 7's record."""
    return [e for e in study_entries() if e.kind in KINDS and e.name != "copy_"]


# The rows timed against torch.add's three streams (grad and x in, grad_input out), not against copy_.
BACKWARD_ROWS = ("7_backward", *(e.name for e in BACKWARD))  # BACKWARD holds torch.add and aten.elu_backward


def is_backward(name: str) -> bool:
    """A backward row (or its roof, torch.add), of any dtype: "7_backward bfloat16", "elu_backward"."""
    return name.split()[0] in BACKWARD_ROWS


def roof_of(name: str, mode: str = "") -> str:
    """The row a row's time is taken over: its dtype's copy_, or its dtype's torch.add for a backward row."""
    roof = "torch.add" if is_backward(name) else "copy_"
    return f"{roof} {mode}" if mode in DTYPES16 else roof


BYTES_PER_ELEMENT = {"": 4, "in_place": 4, "bfloat16": 2, "float16": 2}  # per direction


def group(name: str) -> list[Entry]:
    """The entries that answer one question (see GROUPS), in the order they are listed."""
    if name not in GROUPS:
        raise KeyError(f"unknown group {name!r}; groups: {', '.join(GROUPS)}")
    return [e for e in _ALL if e.group == name]


def builds(entries=None) -> list[tuple[str, tuple[str, ...]]]:
    """Every (variant, flags) that entries compile (default: the whole study), for build_all."""
    entries = study_entries() if entries is None else entries
    return sorted({(e.variant, e.flags) for e in entries if e.variant})


def resolve(entries) -> list[Entry]:
    return [ENTRIES[e] if isinstance(e, str) else e for e in entries]


def stream_floor_ms(rows) -> float | None:
    """The measured floor of a read+write stream: a read-only and a write-only stream of the same bytes, run
    apart (the sum of their medians), or None if a row is missing."""
    by_name = {r["name"]: r for r in rows}
    if not all(n in by_name for n in STREAM_HALVES):
        return None
    return sum(by_name[n]["timing"]["median_ms"] for n in STREAM_HALVES)


def grid_stride_blocks(entry: Entry | str, sm_count: int, numel: int) -> int:
    """The grid a grid-stride entry launches at full size (the launcher's rule, in Python)."""
    entry = ENTRIES[entry] if isinstance(entry, str) else entry
    if entry.variant != "3_grid_stride":
        raise ValueError(f"{entry.name} is not a grid-stride entry")
    knobs = dict(f[2:].split("=") for f in entry.flags if f.startswith("-DELU_GRID_"))
    threads = int(knobs.get("ELU_GRID_THREADS", 512))
    waves = int(knobs.get("ELU_GRID_WAVES", 0))
    needed = -(-(numel // 4) // threads)
    per_sm = 2048 // threads  # these kernels use few registers: the thread limit decides
    wanted = 1152 if waves == 0 else needed if waves < 0 else waves * sm_count * per_sm
    return min(needed, wanted)


def fuzz_builds(which: str) -> list[tuple[str, tuple[str, ...]]]:
    """The (variant, flags) builds to fuzz and sanitize: one per kernel file, or every build of the study."""
    if which == "all":
        return builds()
    return [(name, ()) for name in known_variants()]


INEXACT_16 = ("6_16bit_expf", "7_unchecked")  # entries whose 16-bit results are not PyTorch's bits, by design


def exact_at_16_bits(variant: str, flags: tuple[str, ...] | list[str] = ()) -> bool:
    """Whether a build's 16-bit path (if it has one) claims PyTorch's bits: not where a study entry that builds it
    is one of INEXACT_16 (expf - 1, or step 7's unchecked polynomial)."""
    same = [e for e in ENTRIES.values() if e.variant == variant and tuple(e.flags) == tuple(flags)]
    return not any(e.name.split()[0] in INEXACT_16 for e in same)


def computes_elu(variant: str, flags: tuple[str, ...] | list[str] = ()) -> bool:
    """Whether a build's results can be compared with ELU: not when every study entry that compiles it
    is unchecked (step 2's file built as a plain copy kernel). Its memory accesses are fuzzed all the same."""
    entries = [e for e in ENTRIES.values() if e.variant == variant and tuple(e.flags) == tuple(flags)]
    return not entries or any(e.checked for e in entries)


def build_id(variant: str, flags: tuple[str, ...] | list[str] = ()) -> str:
    """A build's name in test ids and records: ``3_grid_stride`` or ``3_grid_stride[-DELU_GRID_WAVES=2]``."""
    return f"{variant}[{' '.join(flags)}]" if flags else str(variant)
