"""Every record's type: one msgspec Struct per job (``TYPES``), built from pieces shared across records.

``record.check_schema`` validates a record read from disk against its job's type (``msgspec.convert``, strict: no
coercion); the record itself stays the plain dict its readers use. A field is required unless it has a default
(``UNSET``: the key may be absent, never null); keys a type does not name are allowed. ``dict[str, X]`` is a map
keyed by a name, an alpha or a length. A number's unit is in its JSON schema (``record.json_schema``) as "unit"."""

from typing import Annotated, Generic, Literal, TypeVar

from msgspec import UNSET, Meta, Struct, UnsetType, defstruct, field


def _alike(name: str, kind, fields: str, **options) -> type[Struct]:
    """A Struct whose fields (named in ``fields``, space-separated, in order) are all of one type."""
    return defstruct(name, [(f, kind) for f in fields.split()], **options)


def _unit(kind: type, unit: str):
    return Annotated[kind, Meta(extra_json_schema={"unit": unit})]


Ms, Us, Ns, Sec, Pct, Ulp, GiB = (_unit(float, u) for u in ("ms", "µs", "ns", "s", "%", "ulp", "GiB"))
PerS, BytesPerS, NBytes = _unit(float, "1/s"), _unit(float, "B/s"), _unit(float, "B")
Bytes, Elements, UlpCount = _unit(int, "B"), _unit(int, "elements"), _unit(int, "ulp")
MHz, Watts, Joules = _unit(float, "MHz"), _unit(float, "W"), _unit(float, "J")
Unset = UnsetType
Dtype = Literal["float32", "bfloat16", "float16"]
Direction = Literal["forward", "backward"]
T = TypeVar("T")


# -- shared by every record ---------------------------------------------------------------------------------------
class Stamp(Struct):
    job: str
    version: int


class Provenance(Struct):
    gpu: str
    sm_count: int
    l2_cache_mib: float
    memory_gib: GiB
    compute_capability: str
    driver: str | None
    cuda_runtime: str
    torch: str
    triton: str | None
    nvcc: str | None
    python: str
    date_utc: str
    commit: str | None
    power_limit_w: Watts | None | Unset = UNSET  # NVML's enforced limit (records before it: absent)


class Fingerprint(Struct):  # elu_study.core.fingerprint: what determined the record (python -m elu_study records)
    code: dict[str, str]
    catalogue: str
    builds: dict[str, str]
    toolchain: dict[str, str | None]
    seconds: float | Unset = UNSET  # how long its stage ran (the records runner): what --plan estimates from


class Record(Struct, kw_only=True):
    schema: Stamp
    provenance: Provenance
    fingerprint: Fingerprint | Unset = UNSET  # written after the job's run, beside its record


# -- timing -------------------------------------------------------------------------------------------------------
Center = _alike("Center", Ms, "median_ms p10_ms p90_ms")


class Quantiles(Center):
    runs: int


Spread, Power = _alike("Spread", float, "min median max"), _alike("Power", float, "mean max")


class Nvml(Struct):  # core.timing.NvmlSampler.summary: one round's clocks, power and clock-event reasons
    samples: int
    sm_clock_mhz: Spread | Unset = UNSET  # absent where NVML gave no sample (then "error" says why)
    mem_clock_mhz: Spread | Unset = UNSET
    power_w: Power | Unset = UNSET
    clock_event_reasons: dict[str, float] | Unset = UNSET  # reason -> share of samples
    error: str | None | Unset = UNSET


class Sustained(Center):  # core.timing.time_sustained: one entry alone, back to back, once the board settled
    sm_clock_mhz: MHz | None  # core.timing.NvmlSampler.regime over its samples (null: none), and energy per pass
    power_w: Watts | None
    capped_fraction: float | None  # share of samples at the power cap
    energy_j: Joules | None
    runs: int
    settle_s: Sec
    settled: bool | None  # null: no NVML to tell
    mem_clock_mhz: MHz | None | Unset = UNSET  # the DRAM's clock, median (records before it: absent)


class SustainedRule(Struct):  # core.timing.Sustained
    settle_min_s: Sec
    settle_max_s: Sec
    window_s: Sec
    power_tol: float
    clock_tol_mhz: MHz
    timed_s: Sec
    chunk_s: Sec


class Timing(Quantiles):  # core.timing.time_interleaved: one entry over interleaved rounds
    round_medians_ms: list[Ms]
    samples_ms: list[list[Ms]]
    nvml: list[Nvml]
    sm_clock_mhz: MHz | None | Unset = UNSET  # as Sustained's, over every round (records before it: absent)
    mem_clock_mhz: MHz | None | Unset = UNSET
    power_w: Watts | None | Unset = UNSET
    capped_fraction: float | None | Unset = UNSET
    energy_j: Joules | None | Unset = UNSET
    sustained: Sustained | Unset = UNSET  # the rows timed under sustained load too


class Process(Struct):  # core.processes: one entry in one fresh process
    median_ms: Ms
    x_copy: float | None
    round_medians_ms: list[Ms]
    x_roof: float | None | Unset = UNSET


class Problem(Struct):
    shape: list[int]
    numel: Elements


class TimedProblem(Problem):
    dtype: str
    alpha: float


# -- checks and static SASS -----------------------------------------------------------------------------------------
class Check(Struct):  # core.check.CheckResult: float32 forward against torch and float64
    passed: bool
    trials: int
    unwritten: int
    max_abs_err_vs_torch: float
    max_abs_err_vs_fp64: float


class RowCheck(Struct):  # a row's: a Check, or a float32 backward's against aten (core.exhaustive.check_backward32)
    passed: bool
    trials: int | Unset = UNSET
    unwritten: int | Unset = UNSET
    max_abs_err_vs_torch: float | Unset = UNSET
    max_abs_err_vs_fp64: float | Unset = UNSET
    against: str | Unset = UNSET
    elements: int | Unset = UNSET
    alpha: float | Unset = UNSET
    grad: str | Unset = UNSET
    bit_mismatches: int | Unset = UNSET
    max_abs_err: float | Unset = UNSET
    untouched: int | Unset = UNSET


class Exhaustive(Struct, kw_only=True):  # core.exhaustive.tally: every bit pattern of a 16-bit dtype, every alpha
    dtype: str
    inputs: int
    alphas: int
    mismatches: int
    required_alphas: list[float]
    required_mismatches: int
    alphas_with_mismatches: int
    untouched: int
    grads: int | Unset = UNSET  # a backward's: the gradients each pattern met


class Sass(Struct):  # core.sass.KernelReport
    function: str
    loads: dict[str, int]  # opcode -> count
    stores: dict[str, int]
    mufu_ex2: int
    fp32_ops: int
    round_down_ffma: int
    ftz_ops: int
    registers: int
    stack_bytes: Bytes
    local_bytes: Bytes


class Row(Struct, kw_only=True):  # a row of the study, step 6's and step 7's records, as core.harness.measure fills it
    name: str
    kind: str
    what: str
    base: str | None
    flags: list[str]
    timing: Timing
    check: RowCheck | None
    sass: Sass | None
    mode: Literal["", "in_place", "bfloat16", "float16"]  # core.entries.BYTES_PER_ELEMENT
    dtype: Dtype
    direction: Direction
    exhaustive: Exhaustive | None


class Method(Struct, kw_only=True):
    trials: int
    rounds: int
    warmup_ms: Ms | Unset = UNSET  # do_bench's, per call and round (records before it: 50)
    rep_ms: Ms | Unset = UNSET  # (records before it: 200)
    sustained: SustainedRule | Unset = UNSET


class Rows(Record, kw_only=True):  # core.harness.measure's record: rows checked, then timed in interleaved rounds
    problem: TimedProblem
    peak_bytes_per_s: BytesPerS | None
    peak_source: str | None
    method: Method
    rows: list[Row]


# -- Nsight Compute -------------------------------------------------------------------------------------------------
class NcuSetup(Struct):
    version: str
    clock_control: str
    metrics: dict[str, str]  # name in the record -> ncu metric
    stall_metrics: list[str]
    command: str


class Counters(Struct, kw_only=True):  # core.ncu: one entry's kernels, combined; a counter ncu lacks is null
    name: str
    kernel: str
    kernels: int
    duration_ns: Ns | None
    dram_read_bytes: NBytes | None
    dram_write_bytes: NBytes | None
    dram_pct_of_peak: Pct | None
    l2_hit_pct: Pct | None
    achieved_occupancy_pct: Pct | None
    registers: float | None
    grid_size: float | None
    block_size: float | None
    waves_per_sm: float | None
    warp_instructions: float | None
    sm_cycles_per_s: PerS | None
    stalls: dict[str, float]  # stall reason -> warps per issue
    dram_bytes_over_min: float | Unset = UNSET
    thread_instructions_per_element: float | Unset = UNSET


class CounterRows(Struct):  # a record's "counters": Nsight Compute's rows, or why there are none
    rows: list[Counters]
    ncu: NcuSetup | Unset = UNSET
    skipped: str | Unset = UNSET


class Ncu(Record, kw_only=True):
    ncu: NcuSetup
    problem: Problem
    note: str
    rows: list[Counters]


# -- beyond (step 6) --------------------------------------------------------------------------------------------------
class Beyond(Rows, kw_only=True):
    counters: CounterRows
    processes: list[dict[str, Process]]


# -- sixteen (step 7) -------------------------------------------------------------------------------------------------
Build = list[str | list[str] | None]  # [variant (None: a library's peer), flags]


class SixteenProblem(TimedProblem):
    input: str


class BuildExhaustive(Exhaustive, kw_only=True):
    build: Build
    expect_exact: bool


class Sass16(Struct):  # the static SASS of a 16-bit kernel, or (only) why there is none
    function: str | Unset = UNSET
    kernel: str | Unset = UNSET
    instructions: int | Unset = UNSET
    elements_per_thread: int | Unset = UNSET
    opcodes: dict[str, int] | Unset = UNSET
    error: str | Unset = UNSET

    def __post_init__(self):
        given = [f for f in self.__struct_fields__ if getattr(self, f) is not UNSET]
        if given != ["error"] and given != list(self.__struct_fields__[:-1]):
            raise ValueError(f"expected every field but 'error', or 'error' alone; got {given}")


class Row16(Row, kw_only=True):
    batch: str  # the dtype batch it was timed in


class Sixteen(Rows, kw_only=True):
    problem: SixteenProblem
    rows: list[Row16]
    exhaustive: dict[str, BuildExhaustive]  # entry
    exhaustive_backward: dict[str, BuildExhaustive]
    sass16: dict[str, Sass16]
    timed_alpha: float
    counters: CounterRows


# -- accuracy -------------------------------------------------------------------------------------------------------
class AccuracyMethod(Struct):
    n_inputs: int
    every_input: bool
    alphas: list[float]


class Formula(Struct):
    name: str
    what: str
    exponential: str
    documented_bound: str
    variant: str | None
    flushes_denormals: bool
    fast_math: bool


class TieCheck(Struct):
    n: Elements
    disagree: int


class SampleCheck(Struct):
    n: Elements
    max_err_ulp64: Ulp


class Reference(Struct):
    margin_ulp64: UlpCount
    near_midpoint: int
    exact_ties_tiny_x: int
    ties_corrected: int
    resolved: int
    corrected: int
    unresolved: int
    tie_check: TieCheck
    sample_check: SampleCheck


class SameAs(Struct):
    as_: str = field(name="as")
    n_differ: int


class Worst(Struct):
    ulp: Ulp


class Signed(Struct, Generic[T]):  # by the input's sign
    negative: T
    positive: T


class Tolerance(Struct):
    n_checked: int
    n_fail: int
    max_ratio: float | None


class Bound(Struct):
    exponential: str
    documented: str
    n_exceed: int


class InputClass(Struct):
    n: Elements
    correctly_rounded: int
    identical_to_felu: int
    plus_zero_out: int


class Binades(Struct):  # one entry per negative binade
    max_ulp: list[Ulp]
    predicted_max_ulp: list[Ulp]


class FormulaErrors(Struct):
    n: Elements
    max_ulp: Signed[Worst | None]
    correctly_rounded: int
    bit_identical_to_felu: int
    tolerance: Tolerance
    bound: Bound
    classes: dict[str, InputClass]
    binades_negative: Binades


class AccuracyRun(Struct):  # one alpha
    reference: Reference
    same_as: dict[str, SameAs]  # a build whose outputs are another's, bit for bit
    formulas: dict[str, FormulaErrors]


class Accuracy(Record, kw_only=True):
    method: AccuracyMethod
    formulas: list[Formula]
    runs: dict[str, AccuracyRun]  # alpha


# -- sizes ----------------------------------------------------------------------------------------------------------
class SizesProblem(Struct):
    dtype: str
    alpha: float
    bytes_per_element: int
    input: str


class SizesEntry(Struct):
    name: str
    kind: str


class PointCheck(Struct):
    passed: bool
    unwritten: int
    max_abs_err_vs_torch: float
    elements_compared: int


SleepRetries = _alike("SleepRetries", int, "cold warm")


class Point(Struct):
    entry: str
    kind: str
    n: Elements
    bytes: Bytes
    check: PointCheck | None
    cold: Quantiles
    warm: Quantiles
    host: Quantiles
    sleep_retries: SleepRetries
    host_loops_gpu_busy: int


Floor = _alike("Floor", Ms, "datasheet_ms stream_cold_ms stream_warm_ms")


class Regimes(Struct):
    reference: str
    launch_bound_max_n: int
    l2_fit_max_n: int
    warm_gain: dict[Annotated[str, Meta(pattern="^[1-9][0-9]*$")], float]  # length -> cold over warm median


class Sizes(Record, kw_only=True):
    job: str
    problem: SizesProblem
    l2_bytes: Bytes
    peak_bytes_per_s: BytesPerS | None
    sizes: list[int]
    entries: list[SizesEntry]
    torch_compile_graphs: int
    errors: list
    points: list[Point]
    floors: dict[str, Floor]  # length
    regimes: Regimes


# -- launch ---------------------------------------------------------------------------------------------------------
class LaunchMethod(Struct):
    rounds: int
    warmup_ms: Ms
    rep_ms: Ms
    interleaved: bool
    check_trials: int
    check: str
    timed_call: str
    noise: str
    occupancy: str


class Timed(Struct):
    what: str
    timing: Timing
    x_copy: float
    noise_ms: Ms


class CheckedTimed(Timed):
    check: Check


class References(Struct):
    copy_: Timed
    float4: CheckedTimed = field(name="2_float4")


Occupancy = _alike("Occupancy", int, "registers resident_blocks_per_sm resident_threads_per_sm load_bytes_in_flight_per_sm")


class Cell(Struct):
    name: str
    threads: int
    vectors: int
    hints: bool
    blocks_per_sm: int
    grid_stride: bool
    check: Check
    bit_identical_to_2_float4: bool
    correct: bool
    occupancy: Occupancy
    timing: Timing
    x_copy: float
    noise_ms: Ms


class Best(Struct):  # the fastest correct cell, and those tied with it (it first)
    name: str
    tied: list[str]


class LaunchRecord(Record, kw_only=True):
    problem: TimedProblem
    method: LaunchMethod
    references: References
    cells: list[Cell]
    roof_ms: Ms
    best: Best


# -- model ----------------------------------------------------------------------------------------------------------
class Default(Struct):
    dtype: str
    direction: Direction
    build: str
    flags: str
    measured_as: str = field(name="measured as")


class AccuracyCheck(Struct):
    passed: bool
    worst_ulp_by_alpha: dict[str, dict[str, Ulp]]  # alpha -> route
    inputs_per_alpha: int


class Opcheck(Struct):
    passed: bool
    calls: int
    failed: list[str]


Gradients = _alike("Gradients", bool, "passed gradcheck_float64 gradgradcheck_float64 float32_grad_bit_identical "
                   "float32_double_backward_bit_identical forward_ad_equal vmap_close")
CudaGraph = _alike("CudaGraph", bool, "passed replay_equals_eager_forward replay_equals_eager_backward")


class Layouts(Struct):
    passed: bool
    channels_last_kept: bool
    channels_last_kernels: int
    export_has_the_op: bool
    export_output_equal: bool
    compile_fuses_f_elu: bool
    compile_strict_keeps_the_op: bool
    autocast_bit_identical: bool


class Checks(Struct):
    accuracy: AccuracyCheck
    opcheck: Opcheck
    gradients: Gradients
    cuda_graph: CudaGraph
    layouts_and_tracing: Layouts


class HostCost(Struct):
    route: str
    numel: Elements
    requires_grad: bool
    autocast: bool
    us_per_call: Us
    us_runs: list[Us]


class Step(Struct, kw_only=True):  # whole steps of a model, timed in runs
    model: str
    dtype: str
    mode: Literal["train", "infer"]
    compiled: bool
    elu: str
    ms: Ms
    noise_ms: Ms
    ms_runs: list[Ms]
    steps_per_run: int
    elu_ms: Annotated[Ms, Meta(description="ELU's kernels' device time in one profiled step")]
    timer: Annotated[Literal["cuda_events", "wall_clock"], Meta(
        description="how a run was timed: CUDA events around its steps; absent: wall clock over the run")] | Unset = UNSET
    device_ms: Annotated[Ms, Meta(description="everything the device ran in that profiled step")] | Unset = UNSET
    device_events: Annotated[int, Meta(ge=1, description="device events (kernels, copies, fills) that step ran")] \
        | Unset = UNSET


class Model(Record, kw_only=True):
    defaults: list[Default]
    checks: Checks
    host_cost: list[HostCost]
    end_to_end: list[Step]


# -- sanitize and tests ---------------------------------------------------------------------------------------------
class Verdict(Struct):
    errors: int | None
    ok: bool


class Sanitize(Record, kw_only=True):
    passed: bool
    compute_sanitizer: str | None
    tools: list[str]
    builds: dict[str, dict[str, Verdict]]  # build -> tool


Counts = _alike("Counts", int, "passed failed error skipped xfailed xpassed")


class Fuzz(Struct):
    examples_per_test: int
    hypothesis_seed: int | str
    builds: Literal["files", "all"]  # testing.suite.BUILD_SETS
    rerun_with: str


class Tests(Record, kw_only=True):
    date_utc: str
    command: str
    duration_s: Sec | None
    counts: Counts
    failures: list[str]
    fuzz: Fuzz


# "study", the main record, is Rows (a "backward" part of older records is left unread).
TYPES: dict[str, type[Record]] = {
    "study": Rows, "ncu": Ncu, "accuracy": Accuracy, "sanitize": Sanitize, "beyond": Beyond, "sizes": Sizes,
    "launch": LaunchRecord, "model": Model, "sixteen": Sixteen, "tests": Tests,
}
