"""Every record's type: one msgspec Struct per job (``TYPES``), built from pieces shared across records.

``record.check_schema`` validates a record read from disk against its job's type (``msgspec.convert``, strict: no
coercion); the record itself stays the plain dict its readers use. A field is required unless it has a default
(``UNSET``: the key may be absent, never null); keys a type does not name are allowed. ``dict[str, X]`` is a map
keyed by a name, an alpha or a length. A number's unit is in its JSON schema (``record.json_schema``) as "unit"."""

from typing import Annotated, Literal

from msgspec import UNSET, Meta, Struct, defstruct, UnsetType as Unset


Fields = list[tuple[object, str]]  # [(type, "names, space-separated"), ...]: a type may come twice, a name once


def _alike(name: str, kinds: Fields, optional: Fields = (), base: type = Struct, **options) -> type[Struct]:
    """A Struct: ``base``'s fields, then ``kinds``' in order, each pair a type and the fields of that type; those of
    ``optional`` may be absent (``UNSET``). A list of pairs, not a dict: a type given twice keeps both groups."""
    fields = [(f, kind) for kind, names in kinds for f in names.split()]
    fields += [(f, kind | Unset, UNSET) for kind, names in optional for f in names.split()]
    if len(names := [f[0] for f in fields]) != len(set(names)):
        raise TypeError(f"{name}: a field named twice in {names}")
    return defstruct(name, fields, bases=(base,), **options)


def _unit(kind: type, unit: str):
    return Annotated[kind, Meta(extra_json_schema={"unit": unit})]


Ms, Us, Ns, Sec, Pct, Ulp, GiB = (_unit(float, u) for u in ("ms", "µs", "ns", "s", "%", "ulp", "GiB"))
PerS, BytesPerS, NBytes = _unit(float, "1/s"), _unit(float, "B/s"), _unit(float, "B")
Bytes, Elements, UlpCount = _unit(int, "B"), _unit(int, "elements"), _unit(int, "ulp")
MHz, Watts, Joules = _unit(float, "MHz"), _unit(float, "W"), _unit(float, "J")
Dtype = Literal["float32", "bfloat16", "float16"]
Direction = Literal["forward", "backward"]


# -- shared by every record ---------------------------------------------------------------------------------------
Stamp = _alike("Stamp", [(str, "job"), (int, "version")])
Provenance = _alike("Provenance", [(str, "gpu compute_capability cuda_runtime torch python date_utc"),
                                   (str | None, "driver triton nvcc commit"), (int, "sm_count"), (float, "l2_cache_mib"),
                                   (GiB, "memory_gib")],
                    [(Watts | None, "power_limit_w")])  # NVML's enforced limit (records before it: absent)
# elu_study.core.fingerprint: what determined the record (python -m elu_study records); "seconds": how long its stage
# ran (the records runner), what --plan estimates from
Fingerprint = _alike("Fingerprint", [(dict[str, str], "code builds"), (str, "catalogue"),
                                     (dict[str, str | None], "toolchain")], [(float, "seconds")])
# every job's record: its fingerprint is written after the job's run, beside it
Record = _alike("Record", [(Stamp, "schema"), (Provenance, "provenance")], [(Fingerprint, "fingerprint")], kw_only=True)


# -- timing -------------------------------------------------------------------------------------------------------
Center = _alike("Center", [(Ms, "median_ms p10_ms p90_ms")])
Quantiles = _alike("Quantiles", [(int, "runs")], base=Center)
Spread, Power = _alike("Spread", [(float, "min median max")]), _alike("Power", [(float, "mean max")])
# core.timing.NvmlSampler.summary: one round's clocks, power and clock-event reasons (reason -> share of samples);
# the clocks and power are absent where NVML gave no sample (then "error" says why)
Nvml = _alike("Nvml", [(int, "samples")], [(Spread, "sm_clock_mhz mem_clock_mhz"), (Power, "power_w"),
                                        (dict[str, float], "clock_event_reasons"), (str | None, "error")])
# core.timing.time_sustained: one entry alone, back to back, once the board settled; over its samples
# (core.timing.NvmlSampler.regime; null: none) the SM clock, power, share of samples at the power cap, energy per
# pass and the DRAM's clock, median (records before it: absent); "settled" null: no NVML to tell
Sustained = _alike("Sustained", [(MHz | None, "sm_clock_mhz"), (Watts | None, "power_w"), (float | None, "capped_fraction"),
                                 (Joules | None, "energy_j"), (int, "runs"), (Sec, "settle_s"), (bool | None, "settled")],
                   [(MHz | None, "mem_clock_mhz")], base=Center)
SustainedRule = _alike("SustainedRule", [(Sec, "settle_min_s settle_max_s window_s timed_s chunk_s"), (float, "power_tol"),
                                         (MHz, "clock_tol_mhz")])  # core.timing.Sustained
# core.timing.time_interleaved: one entry over interleaved rounds; its clocks, power, capped share and energy as
# Sustained's, over every round (records before them: absent); "sustained": the rows timed under sustained load too
Timing = _alike("Timing", [(list[Ms], "round_medians_ms"), (list[list[Ms]], "samples_ms"), (list[Nvml], "nvml")],
                [(MHz | None, "sm_clock_mhz mem_clock_mhz"), (Watts | None, "power_w"), (float | None, "capped_fraction"),
                 (Joules | None, "energy_j"), (Sustained, "sustained")], base=Quantiles)
Process = _alike("Process", [(Ms, "median_ms"), (float | None, "x_copy"), (list[Ms], "round_medians_ms")],
                 [(float | None, "x_roof")])  # core.processes: one entry in one fresh process
Problem = _alike("Problem", [(list[int], "shape"), (Elements, "numel")])
TimedProblem = _alike("TimedProblem", [(str, "dtype"), (float, "alpha")], base=Problem)


# -- checks and static SASS -----------------------------------------------------------------------------------------
# core.check.CheckResult: float32 forward against torch and float64
Check = _alike("Check", [(bool, "passed"), (int, "trials unwritten"), (float, "max_abs_err_vs_torch max_abs_err_vs_fp64")])
# a row's: a Check, or a float32 backward's against aten (core.exhaustive.check_backward32)
RowCheck = _alike("RowCheck", [(bool, "passed")], [(int, "trials unwritten elements bit_mismatches untouched"),
                                                 (float, "max_abs_err_vs_torch max_abs_err_vs_fp64 alpha max_abs_err"),
                                                 (str, "against grad")])
# core.exhaustive.tally: every bit pattern of a 16-bit dtype, every alpha; "grads": a backward's, the gradients each
# pattern met
Exhaustive = _alike("Exhaustive", [(str, "dtype"), (list[float], "required_alphas"),
                                   (int, "inputs alphas mismatches required_mismatches alphas_with_mismatches untouched")],
                    [(int, "grads")], kw_only=True)
Sass = _alike("Sass", [(str, "function"), (dict[str, int], "loads stores"),  # opcode -> count
                       (int, "mufu_ex2 fp32_ops round_down_ffma ftz_ops registers"),
                       (Bytes, "stack_bytes local_bytes")])  # core.sass.KernelReport
# a row of the study, step 6's and step 7's records, as core.harness.measure fills it (its "mode":
# core.entries.BYTES_PER_ELEMENT)
Row = _alike("Row", [(str, "name kind what"), (str | None, "base"), (list[str], "flags"), (Timing, "timing"),
                     (RowCheck | None, "check"), (Sass | None, "sass"),
                     (Literal["", "in_place", "bfloat16", "float16"], "mode"), (Dtype, "dtype"),
                     (Direction, "direction"), (Exhaustive | None, "exhaustive")], kw_only=True)
# do_bench's warmup_ms and rep_ms, per call and round (records before them: 50 and 200)
Method = _alike("Method", [(int, "trials rounds")], [(Ms, "warmup_ms rep_ms"), (SustainedRule, "sustained")], kw_only=True)
# core.harness.measure's record: rows checked, then timed in interleaved rounds
Rows = _alike("Rows", [(TimedProblem, "problem"), (BytesPerS | None, "peak_bytes_per_s"), (str | None, "peak_source"),
                       (Method, "method"), (list[Row], "rows")], base=Record, kw_only=True)


# -- Nsight Compute -------------------------------------------------------------------------------------------------
NcuSetup = _alike("NcuSetup", [(str, "version clock_control command"), (list[str], "stall_metrics"),
                               (dict[str, str], "metrics")])  # name in the record -> ncu metric
# core.ncu: one entry's kernels, combined; a counter ncu lacks is null; "stalls": stall reason -> warps per issue
Counters = _alike("Counters", [(str, "name kernel"), (int, "kernels"), (Ns | None, "duration_ns"),
                               (NBytes | None, "dram_read_bytes dram_write_bytes"),
                               (Pct | None, "dram_pct_of_peak l2_hit_pct achieved_occupancy_pct"),
                               (float | None, "registers grid_size block_size waves_per_sm warp_instructions"),
                               (PerS | None, "sm_cycles_per_s"), (dict[str, float], "stalls")],
                  [(float, "dram_bytes_over_min thread_instructions_per_element")], kw_only=True)
# a record's "counters": Nsight Compute's rows, or why there are none
CounterRows = _alike("CounterRows", [(list[Counters], "rows")], [(NcuSetup, "ncu"), (str, "skipped")])
Ncu = _alike("Ncu", [(NcuSetup, "ncu"), (Problem, "problem"), (str, "note"), (list[Counters], "rows")],
             base=Record, kw_only=True)


# -- beyond (step 6) --------------------------------------------------------------------------------------------------
Beyond = _alike("Beyond", [(CounterRows, "counters"), (list[dict[str, Process]], "processes")], base=Rows, kw_only=True)


# -- sixteen (step 7) -------------------------------------------------------------------------------------------------
Build = list[str | list[str] | None]  # [variant (None: a library's peer), flags]
SixteenProblem = _alike("SixteenProblem", [(str, "input")], base=TimedProblem)
BuildExhaustive = _alike("BuildExhaustive", [(Build, "build"), (bool, "expect_exact")], base=Exhaustive, kw_only=True)


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


Row16 = _alike("Row16", [(str, "batch")], base=Row, kw_only=True)  # batch: the dtype batch it was timed in
Sixteen = _alike("Sixteen", [(SixteenProblem, "problem"), (list[Row16], "rows"), (float, "timed_alpha"),
                             (dict[str, BuildExhaustive], "exhaustive exhaustive_backward"),  # by entry
                             (dict[str, Sass16], "sass16"), (CounterRows, "counters")], base=Rows, kw_only=True)


# -- accuracy -------------------------------------------------------------------------------------------------------
AccuracyMethod = _alike("AccuracyMethod", [(int, "n_inputs"), (bool, "every_input"), (list[float], "alphas")])
Formula = _alike("Formula", [(str, "name what exponential documented_bound"), (str | None, "variant"),
                             (bool, "flushes_denormals fast_math")])
TieCheck = _alike("TieCheck", [(Elements, "n"), (int, "disagree")])
SampleCheck = _alike("SampleCheck", [(Elements, "n"), (Ulp, "max_err_ulp64")])
Reference = _alike("Reference", [(UlpCount, "margin_ulp64"), (TieCheck, "tie_check"), (SampleCheck, "sample_check"),
                                 (int, "near_midpoint exact_ties_tiny_x ties_corrected resolved corrected unresolved")])


SameAs = _alike("SameAs", [(str, "as_"), (int, "n_differ")], rename={"as_": "as"})
Worst = _alike("Worst", [(Ulp, "ulp")])
Signed = _alike("Signed", [(Worst | None, "negative positive")])  # the worst error by the input's sign
Tolerance = _alike("Tolerance", [(int, "n_checked n_fail"), (float | None, "max_ratio")])
Bound = _alike("Bound", [(str, "exponential documented"), (int, "n_exceed")])
InputClass = _alike("InputClass", [(Elements, "n"), (int, "correctly_rounded identical_to_felu plus_zero_out")])
Binades = _alike("Binades", [(list[Ulp], "max_ulp predicted_max_ulp")])  # one entry per negative binade
FormulaErrors = _alike("FormulaErrors", [(Elements, "n"), (Signed, "max_ulp"), (Tolerance, "tolerance"),
                                         (int, "correctly_rounded bit_identical_to_felu"), (Bound, "bound"),
                                         (dict[str, InputClass], "classes"), (Binades, "binades_negative")])
# one alpha; "same_as": a build whose outputs are another's, bit for bit
AccuracyRun = _alike("AccuracyRun", [(Reference, "reference"), (dict[str, SameAs], "same_as"),
                                     (dict[str, FormulaErrors], "formulas")])
Accuracy = _alike("Accuracy", [(AccuracyMethod, "method"), (list[Formula], "formulas"), (dict[str, AccuracyRun], "runs")],
                  base=Record, kw_only=True)  # runs by alpha


# -- sizes ----------------------------------------------------------------------------------------------------------
SizesProblem = _alike("SizesProblem", [(str, "dtype input"), (float, "alpha"), (int, "bytes_per_element")])
SizesEntry = _alike("SizesEntry", [(str, "name kind")])
PointCheck = _alike("PointCheck", [(bool, "passed"), (int, "unwritten elements_compared"), (float, "max_abs_err_vs_torch")])
SleepRetries = _alike("SleepRetries", [(int, "cold warm")])
Point = _alike("Point", [(str, "entry kind"), (Elements, "n"), (Bytes, "bytes"), (PointCheck | None, "check"),
                         (Quantiles, "cold warm host"), (SleepRetries, "sleep_retries"), (int, "host_loops_gpu_busy")])
Floor = _alike("Floor", [(Ms, "datasheet_ms stream_cold_ms stream_warm_ms")])
# "warm_gain": length -> cold over warm median
Regimes = _alike("Regimes", [(str, "reference"), (int, "launch_bound_max_n l2_fit_max_n"),
                             (dict[Annotated[str, Meta(pattern="^[1-9][0-9]*$")], float], "warm_gain")])
Sizes = _alike("Sizes", [(str, "job"), (SizesProblem, "problem"), (Bytes, "l2_bytes"),
                         (BytesPerS | None, "peak_bytes_per_s"), (list[int], "sizes"), (list[SizesEntry], "entries"),
                         (int, "torch_compile_graphs"), (list, "errors"), (list[Point], "points"),
                         (dict[str, Floor], "floors"), (Regimes, "regimes")],
               base=Record, kw_only=True)  # floors by length


# -- launch ---------------------------------------------------------------------------------------------------------
LaunchMethod = _alike("LaunchMethod", [(int, "rounds check_trials"), (Ms, "warmup_ms rep_ms"), (bool, "interleaved"),
                                       (str, "check timed_call noise occupancy")])
Timed = _alike("Timed", [(str, "what"), (Timing, "timing"), (float, "x_copy"), (Ms, "noise_ms")])
CheckedTimed = _alike("CheckedTimed", [(Check, "check")], base=Timed)
References = _alike("References", [(Timed, "copy_"), (CheckedTimed, "float4")], rename={"float4": "2_float4"})
Occupancy = _alike("Occupancy", [(int, "registers resident_blocks_per_sm resident_threads_per_sm "
                                      "load_bytes_in_flight_per_sm")])
Cell = _alike("Cell", [(str, "name"), (int, "threads vectors blocks_per_sm"), (Check, "check"), (Occupancy, "occupancy"),
                       (bool, "hints grid_stride bit_identical_to_2_float4 correct"), (Timing, "timing"),
                       (float, "x_copy"), (Ms, "noise_ms")])
Best = _alike("Best", [(str, "name"), (list[str], "tied")])  # the fastest correct cell, and those tied with it (it first)
LaunchRecord = _alike("LaunchRecord", [(TimedProblem, "problem"), (LaunchMethod, "method"), (References, "references"),
                                       (list[Cell], "cells"), (Ms, "roof_ms"), (Best, "best")], base=Record, kw_only=True)


# -- model ----------------------------------------------------------------------------------------------------------
Default = _alike("Default", [(str, "dtype build flags measured_as"), (Direction, "direction")],
                 rename={"measured_as": "measured as"})
AccuracyCheck = _alike("AccuracyCheck", [(bool, "passed"), (int, "inputs_per_alpha"),
                                         (dict[str, dict[str, Ulp]], "worst_ulp_by_alpha")])  # alpha -> route
Opcheck = _alike("Opcheck", [(bool, "passed"), (int, "calls"), (list[str], "failed")])
Gradients = _alike("Gradients", [(bool, "passed gradcheck_float64 gradgradcheck_float64 float32_grad_bit_identical "
                                       "float32_double_backward_bit_identical forward_ad_equal vmap_close")])
CudaGraph = _alike("CudaGraph", [(bool, "passed replay_equals_eager_forward replay_equals_eager_backward")])
Layouts = _alike("Layouts", [(bool, "passed channels_last_kept export_has_the_op export_output_equal compile_fuses_f_elu "
                                   "compile_strict_keeps_the_op autocast_bit_identical"), (int, "channels_last_kernels")])
Checks = _alike("Checks", [(AccuracyCheck, "accuracy"), (Opcheck, "opcheck"), (Gradients, "gradients"),
                           (CudaGraph, "cuda_graph"), (Layouts, "layouts_and_tracing")])
HostCost = _alike("HostCost", [(str, "route"), (Elements, "numel"), (bool, "requires_grad autocast"), (Us, "us_per_call"),
                               (list[Us], "us_runs")])


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


Model = _alike("Model", [(list[Default], "defaults"), (Checks, "checks"), (list[HostCost], "host_cost"),
                         (list[Step], "end_to_end")], base=Record, kw_only=True)


# -- sanitize and tests ---------------------------------------------------------------------------------------------
Verdict = _alike("Verdict", [(int | None, "errors"), (bool, "ok")])
Sanitize = _alike("Sanitize", [(bool, "passed"), (str | None, "compute_sanitizer"), (list[str], "tools"),
                               (dict[str, dict[str, Verdict]], "builds")], base=Record, kw_only=True)  # build -> tool
Counts = _alike("Counts", [(int, "passed failed error skipped xfailed xpassed")])
Fuzz = _alike("Fuzz", [(int, "examples_per_test"), (int | str, "hypothesis_seed"), (str, "rerun_with"),
                     (Literal["files", "all"], "builds")])  # testing.suite.BUILD_SETS
Tests = _alike("Tests", [(str, "date_utc command"), (Sec | None, "duration_s"), (Counts, "counts"), (list[str], "failures"),
                         (Fuzz, "fuzz")], base=Record, kw_only=True)


# "study", the main record, is Rows (a "backward" part of older records is left unread).
TYPES: dict[str, type[Record]] = {
    "study": Rows, "ncu": Ncu, "accuracy": Accuracy, "sanitize": Sanitize, "beyond": Beyond, "sizes": Sizes,
    "launch": LaunchRecord, "model": Model, "sixteen": Sixteen, "tests": Tests,
}
