"""Step 7's job (``python -m elu_study sixteen``): what it reads from the kernel file, and the numbers notebook 12
prints from the committed record, each computed here again from the record's raw fields and seen to follow a
perturbed record; on a GPU, the suite's guarantee: the default build bit for bit F.elu on every 16-bit input at
the issue's six alphas, and the monotone-rounding argument for the formulas it checks."""

from __future__ import annotations

import copy
import math
import statistics

import matplotlib
import pytest
import torch

from elu_study.core import exhaustive, record
from elu_study.core.build import compile_variant
from elu_study.core.entries import ENTRIES, STEP7, STEP7_DELTA_BUILDS
from elu_study.jobs.sixteen import analysis, figures, measure
from elu_study.jobs.sixteen.predictions import GOALS, PREDICTIONS, Prediction

matplotlib.use("Agg")
gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: runs the kernel on every input")
# The rows timed over the dtype's torch.add: every 7_backward build (7_backward_table ...), aten's, torch.add itself.
BACKWARD_PREFIXES = ("7_backward", "aten.elu_backward", "torch.add")


def backward_row(name: str) -> bool:
    return name.split()[0].startswith(BACKWARD_PREFIXES)


@pytest.fixture(scope="module")
def rec():
    return record.load(record.REFERENCE_GPU, "sixteen")


def median(r: dict, name: str) -> float:
    return next(x for x in r["rows"] if x["name"] == name)["timing"]["median_ms"]


def over_roof(r: dict, name: str) -> float:
    """A row's median over its roof's, from the raw rows: torch.add for the backward rows, else copy_."""
    dtype = name.split()[-1]
    return median(r, name) / median(r, f"{'torch.add' if backward_row(name) else 'copy_'} {dtype}")


def scaled(r: dict, name: str, factor: float) -> dict:
    """A copy of the record with one row's times (median and spread) multiplied by ``factor``."""
    out = copy.deepcopy(r)
    t = next(x for x in out["rows"] if x["name"] == name)["timing"]
    for key in ("median_ms", "p10_ms", "p90_ms"):
        t[key] *= factor
    return out


# -- the kernel file ----------------------------------------------------------------------------------------


def test_parsing_a_kernel_source():
    text = ("#define ELU7_CHECK 1\n#define ELU7_FORMULA Auto\n"
            "struct A {  // one\n  static constexpr float kEps = 0x1p-17f;\n"
            "  static float f(float x) { return x; }\n};\n"
            "struct Auto {};\nstruct B {\n  static constexpr float kEps = 1.5e-6f;\n};\n"
            "template <> struct FormulaOf<__nv_bfloat16, Auto> { using type = A; };\n"
            "template <> struct FormulaOf<__half, Auto> { using type = B; };\n")
    assert measure.eps_by_formula(text) == {"A": {"literal": "0x1p-17f", "eps": 2.0 ** -17},
                                            "B": {"literal": "1.5e-6f", "eps": 1.5e-6}}
    assert measure.formula_of((), "bfloat16", text) == "A" and measure.formula_of((), "float16", text) == "B"
    assert measure.formula_of(("-DELU7_FORMULA=B",), "bfloat16", text) == "B"
    assert measure.formula_of(("-DELU7_CHECK=0",), "float16", text) == "expm1f"
    assert measure.knob((), "CHECK", text) == "1" and measure.knob(("-DELU7_CHECK=2",), "CHECK", text) == "2"


def test_the_kernel_file_still_says_what_the_record_was_measured_with(rec):
    """The eps and the formula of each build, read from the file now, against those the record holds."""
    assert measure.eps_by_formula() == rec["eps"]
    assert {n: measure.formula_of(ENTRIES[n].flags, ENTRIES[n].mode) for n in rec["formula_of"]} == rec["formula_of"]
    assert set(STEP7_DELTA_BUILDS) <= set(rec["eps"]), "every formula whose delta is measured declares its kEps"
    for e in STEP7:
        if e.variant == measure.VARIANT and not backward_row(e.name):
            assert measure.formula_of(e.flags, e.mode) in (*STEP7_DELTA_BUILDS, "expm1f", "Table"), e.name


def test_each_dtype_batch_holds_its_roofs_and_every_step7_row():
    for dtype in analysis.DTYPES:
        names = measure.timed_names(dtype)
        assert names[:2] == ["copy_", f"copy_ {dtype}"] and len(names) == len(set(names))
        assert {e.name for e in STEP7 if e.mode == dtype} <= set(names)
        assert all(ENTRIES[n].mode in ("", dtype) for n in names)


def test_alphas_cover_the_required_ones_and_the_range_edges():
    a = exhaustive.alphas()
    assert a[:6] == list(exhaustive.REQUIRED_ALPHAS) and a == exhaustive.alphas(), "required first, then seeded"
    drawn = a[6:6 + exhaustive.RANDOM_ALPHAS]
    assert all(float(torch.tensor(v, dtype=torch.float32)) == v for v in drawn), "float32 values: one rounding"
    assert {2.0 ** -100, 2.0 ** 100, 2.0 ** -101, 2.0 ** 101} <= set(a)


def test_the_argument_is_delta_plus_three_roundings_within_eps():
    eps = 2.0 ** -17
    assert analysis.argument_holds(eps - 3 * 2.0 ** -24, eps), "equality is enough"
    assert not analysis.argument_holds(eps - 2 * 2.0 ** -24, eps)


def test_every_prediction_names_a_catalogue_entry_or_a_measured_formula():
    for p in (*PREDICTIONS, *GOALS):
        if p.metric in ("delta_log2", "argument"):
            assert p.subject in STEP7_DELTA_BUILDS, p
        else:
            assert p.subject == "every checked build" or p.subject in ENTRIES, p
            assert p.base is None or p.base in ENTRIES, p


# -- the record's numbers, as notebook 12 prints them ------------------------------------------------------


def test_times_are_over_the_rows_own_roof(rec):
    for dtype in analysis.DTYPES:
        for backward, col in ((False, "x own copy_"), (True, "x torch.add")):
            df = analysis.frame(rec, dtype, backward)
            expected = {r["name"].removesuffix(f" {dtype}"): over_roof(rec, r["name"]) for r in rec["rows"]
                        if r["mode"] == dtype and backward_row(r["name"]) == backward}
            assert df[col].to_dict() == pytest.approx(expected)
            assert list(df[col]) == sorted(df[col])
    gap = analysis.show("gap", rec)
    for dtype in analysis.DTYPES:
        assert f"**{over_roof(rec, f'7_sixteen_bits {dtype}'):.3f}x** its own `copy_`" in gap


def test_a_slower_default_changes_the_gap_line_the_grades_and_the_goals(rec):
    name = "7_sixteen_bits float16"
    before, slow = over_roof(rec, name), scaled(rec, name, 1.5)
    after = over_roof(slow, name)
    assert after == pytest.approx(1.5 * before)
    assert f"**{after:.3f}x**" in analysis.show("gap", slow) and f"**{before:.3f}x**" not in analysis.show("gap", slow)
    graded = analysis.show("graded", slow)
    # the goals grade the main record where it is newer than this one: there the default is unchanged
    main = record.load()
    if main["provenance"]["date_utc"] > slow["provenance"]["date_utc"]:
        assert f"| must: 1.01x own copy_ | {name} | {over_roof(main, name):.3f} |" in graded
    else:
        assert f"| must: 1.01x own copy_ | {name} | {after:.3f} | NOT met |" in graded
    grade = next(g for g in analysis.grades(slow) if g["name"] == name and g["metric"] == "x_own_copy")
    assert grade["value"] == pytest.approx(after) and grade["verdict"] == "MISSED"
    # 7_plain_loads float16 is graded against the default plus (-0.01, 0.03): its range moves with the default
    plain = next(g for g in analysis.grades(slow) if g["name"] == "7_plain_loads float16, from 7_sixteen_bits float16")
    assert (plain["lo"], plain["hi"]) == pytest.approx((after - 0.01, after + 0.03))
    assert plain["verdict"] == ("HELD" if after - 0.01 <= over_roof(slow, "7_plain_loads float16") <= after + 0.03
                                else "MISSED (faster)")


def test_every_time_prediction_is_graded_on_its_own_range(rec):
    """HELD exactly where the value lies in the range written (or that range around its base entry's value)."""
    held = 0
    for p, g in zip(PREDICTIONS, analysis.grades(rec, PREDICTIONS)):
        if p.metric != "x_own_copy" or g["verdict"] == "NOT MEASURED":  # a row this record lacks
            assert p.metric != "x_own_copy" or not any(r["name"] == p.subject for r in rec["rows"])
            continue
        x, shift = over_roof(rec, p.subject), over_roof(rec, p.base) if p.base else 0.0
        lo, hi = p.bounds[0] + shift, p.bounds[1] + shift
        assert g["value"] == pytest.approx(x)
        assert g["verdict"] == ("HELD" if lo <= x <= hi else "MISSED (faster)" if x < lo else "MISSED"), p
        held += g["verdict"] == "HELD"
    assert held > 0


def test_the_graded_table_is_the_one_prediction_following_the_record(rec):
    from elu_study.jobs.sixteen.predictions import PREDICTION

    def verdicts(r):
        return [line.split(" | ")[-1].rstrip(" |") for line in str(analysis.show("graded", r)).splitlines()
                if line.startswith("| 7_sixteen_bits") and " to " in line]

    assert verdicts(rec) == [g["verdict"] for g in analysis.grades(rec, PREDICTION)] and len(PREDICTION) == 6
    broken = copy.deepcopy(rec)  # one mismatch on float16: its row misses, the others stay
    broken["exhaustive"]["7_sixteen_bits float16"]["mismatches"] = 1
    before, after = verdicts(rec), verdicts(broken)
    assert [i for i, (x, y) in enumerate(zip(before, after)) if x != y] == [5] and after[5] == "MISSED"


def test_the_budget_is_issue_slots_in_copys_time_per_element(rec):
    text = analysis.show("budget", rec)
    sms, numel = rec["provenance"]["sm_count"], rec["problem"]["numel"]
    for dtype in analysis.DTYPES:
        mhz = statistics.median(s["sm_clock_mhz"]["median"] for r in rec["rows"] if r["mode"] == dtype
                                for s in r["timing"]["nvml"] if s["samples"])
        copy_ms = median(rec, f"copy_ {dtype}")
        per = sms * 4 * 32 * mhz * 1e6 * copy_ms * 1e-3 / numel
        clock = f"{mhz:.0f} MHz (NVML while timed: the median over all the dtype's rows, not `copy_`'s own clock)"
        assert f"{clock} x {copy_ms:.3f} ms (`copy_`) / {numel:,} elements" in text
        assert f"elements = **{per:.1f}** thread instructions per element" in text
        used = analysis.budget_frame(rec)["used %"].to_dict()
        k = next(c for c in rec["counters"]["rows"] if c["name"] == f"7_sixteen_bits {dtype}")
        assert used[f"7_sixteen_bits {dtype}"] == pytest.approx(100 * k["thread_instructions_per_element"] / per)
    slow = scaled(rec, "copy_ bfloat16", 1.5)  # a slower roof: half as many instructions again fit in it
    bf16 = next(line for line in analysis.show("budget", slow).splitlines() if line.startswith("- bfloat16"))
    assert f"{1.5 * median(rec, 'copy_ bfloat16'):.3f} ms" in bf16


def test_the_issue_share_is_warp_instructions_at_four_per_sm_per_cycle(rec):
    text, sms = analysis.show("expm1f", rec), rec["provenance"]["sm_count"]
    for dtype in analysis.DTYPES:
        k = next(c for c in rec["counters"]["rows"] if c["name"] == f"7_exact {dtype}")
        pct = 100 * k["warp_instructions"] / (sms * 4 * k["sm_cycles_per_s"]) / (k["duration_ns"] * 1e-9)
        assert f"{k['thread_instructions_per_element']:.1f} ({dtype})" in text and f"{pct:.0f} %" in text
    fewer = copy.deepcopy(rec)
    for k in fewer["counters"]["rows"]:
        if k["name"].startswith("7_exact"):
            k["warp_instructions"] /= 2
    assert "not issue-bound (the rule" in analysis.show("expm1f", fewer)


def test_the_exhaustive_verdict_counts_the_exact_builds(rec):
    checks = {**rec["exhaustive"], **rec["exhaustive_backward"]}
    exact = [n for n, c in checks.items() if c["expect_exact"]]
    bad = [n for n in exact if checks[n]["mismatches"] or checks[n]["untouched"]]
    text = analysis.show("exhaustive", rec)
    assert f"**{len(exact) - len(bad)} of {len(exact)}** builds meant to be exact" in text
    assert analysis.failures(rec) == bad == []
    broken = copy.deepcopy(rec)
    broken["exhaustive"]["7_exact float16"]["mismatches"] = 3
    broken["delta"]["Mid"]["float16"]["holds"] = False  # 7_poly float16 uses Mid
    text = analysis.show("exhaustive", broken)
    assert f"**{len(exact) - 1} of {len(exact)}**" in text and "NOT 7_exact float16" in text
    assert "| 7_exact float16 | yes | 3 |" in text
    assert analysis.failures(broken) == ["7_exact float16", "argument fails: Mid on float16"]


def test_the_delta_table_is_log2_of_the_record(rec):
    df = analysis.delta_frame(rec).reset_index()
    for _, r in df.iterrows():
        d = rec["delta"][r["formula"]]
        assert r["eps log2"] == pytest.approx(math.log2(d["eps"]))
        assert r["delta + 3*2^-24 log2"] == pytest.approx(math.log2(d[r["dtype"]]["delta"] + 3 * 2.0 ** -24))
        slots = rec["fallback"][r["formula"]][r["dtype"]]["warp_pair_slots"]
        assert r["expm1f in warp slots %"] == pytest.approx(100 * slots)


def test_the_checks_cost_and_the_expm1f_share_are_graded_from_the_counters(rec):
    inst = {c["name"]: c["thread_instructions_per_element"] for c in rec["counters"]["rows"]}
    for dtype in analysis.DTYPES:
        p = Prediction(f"7_poly {dtype}", "check_inst", (0, 100))
        assert analysis.measured(rec, p) == pytest.approx(inst[f"7_poly {dtype}"] - inst[f"7_unchecked {dtype}"])
        slots = rec["fallback"][rec["formula_of"][f"7_poly {dtype}"]][dtype]["warp_pair_slots"]
        assert analysis.measured(rec, Prediction(f"7_poly {dtype}", "fallback_slots", (0, 1))) == slots
    every, but = (Prediction("every checked build", "mismatches", (0, 0), exclude=x) for x in ("", "Table"))
    broken = copy.deepcopy(rec)
    broken["exhaustive"]["7_plain_loads float16"]["mismatches"] = 33  # a build of the table
    assert analysis.measured(broken, every) == 33 and analysis.measured(broken, but) == 0


def test_the_figure_draws_the_record(rec):
    name = "7_sixteen_bits bfloat16"
    for r, factor in ((rec, 1.0), (scaled(rec, name, 1.5), 1.5)):
        ax = figures.xcopy_figure(r).axes[0]
        labels = [t.get_text() for t in ax.get_yticklabels()]
        widths = dict(zip(labels, (p.get_width() for p in ax.patches)))
        assert widths["7_sixteen_bits"] == pytest.approx(factor * over_roof(rec, name) - 1)
        assert widths["7_backward (/ torch.add)"] == pytest.approx(over_roof(rec, "7_backward bfloat16") - 1)


# -- on a GPU: the suite's guarantee ---------------------------------------------------------------------


@gpu
@pytest.mark.parametrize("dtype", analysis.DTYPES)
def test_default_build_is_bit_identical_on_every_input_at_the_required_alphas(dtype):
    module = ENTRIES[f"7_sixteen_bits {dtype}"].build()
    c = exhaustive.check_patterns(module, dtype, exhaustive.REQUIRED_ALPHAS)
    assert c["inputs"] == 65536 and c["alphas"] == 6
    assert c["mismatches"] == 0 and c["untouched"] == 0, c


@gpu
@pytest.mark.parametrize("dtype", analysis.DTYPES)
def test_the_backward_is_bit_identical_to_atens_on_every_input(dtype):
    c = exhaustive.check_backward(ENTRIES[f"7_backward {dtype}"].build(), dtype, exhaustive.REQUIRED_ALPHAS)
    assert c["grads"] == 5 and c["alphas"] == 6
    assert c["mismatches"] == 0 and c["untouched"] == 0, c


@gpu
@pytest.mark.parametrize("dtype", analysis.DTYPES)
def test_the_table_built_by_each_block_gives_the_same_bits(dtype):
    """ELU7_FILL=0 (each block computes its table: the path of a first call inside CUDA graph capture)."""
    module = compile_variant(measure.VARIANT, extra_cuda_cflags=["-DELU7_FILL=0"])
    c = exhaustive.check_patterns(module, dtype, exhaustive.REQUIRED_ALPHAS)
    assert c["mismatches"] == 0 and c["untouched"] == 0, c


@gpu
def test_the_table_kernels_replay_in_a_cuda_graph_on_a_side_stream():
    module = ENTRIES["7_sixteen_bits bfloat16"].build()
    x = (torch.randn(1 << 20, device="cuda") * 4).to(torch.bfloat16)
    g = torch.randn_like(x)
    y, dx = torch.empty_like(x), torch.empty_like(x)
    graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    with torch.cuda.stream(stream):
        module.elu(x, 0.5, out=y)  # warm-up on the side stream, as graph capture asks
        torch.cuda.synchronize()
        with torch.cuda.graph(graph, stream=stream):
            module.elu(x, 0.5, out=y)
            module.elu_backward(g, x, 0.5, out=dx)
    y.zero_(), dx.zero_()
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(y.view(torch.int16), torch.nn.functional.elu(x, 0.5).view(torch.int16))
    assert torch.equal(dx.view(torch.int16), torch.ops.aten.elu_backward(g, 0.5, 1, 1, False, x).view(torch.int16))


@gpu
@pytest.mark.parametrize("dtype", analysis.DTYPES)
def test_the_polynomials_argument_holds(dtype):
    formula = measure.formula_of(ENTRIES[f"7_poly {dtype}"].flags, dtype)
    variant, flags = STEP7_DELTA_BUILDS[formula]
    d, _, _ = measure.delta_of(compile_variant(variant, extra_cuda_cflags=list(flags)), dtype)
    eps = measure.eps_by_formula()[formula]["eps"]
    assert d["inputs"] == (32640 if dtype == "bfloat16" else 31744)
    assert analysis.argument_holds(d["delta"], eps), (formula, d["delta_log2"], math.log2(eps))
    assert d["tiny_differ"] == 0 and d["zero_results_equal"]
