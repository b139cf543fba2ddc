"""Step 7's job (``python -m elu_study sixteen``): its analysis on a synthetic record (no GPU), what it reads from
the kernel file, and, on a GPU, the suite's guarantee: the default build bit for bit F.elu on every 16-bit input
at the issue's six alphas, and the monotone-rounding argument for the formula it uses on each dtype."""

from __future__ import annotations

import math

import matplotlib
import pytest
import torch

from elu_study.core import exhaustive
from elu_study.core.build import compile_variant
from elu_study.core import hardware
from elu_study.core.tables import compact
from elu_study.core.entries import ENTRIES, STEP7, STEP7_DELTA_BUILDS
from elu_study.jobs import sixteen
from elu_study.jobs.sixteen import analysis, figures, kernel, measure
from elu_study.jobs.sixteen.predictions import GOALS, PREDICTIONS, Prediction

matplotlib.use("Agg")
gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: runs the kernel on every input")

NUMEL, SMS, MHZ = 1 << 30, 132, 1980.0


def timing(ms: float, spread: float = 0.01) -> dict:
    return {"median_ms": ms, "p10_ms": ms * (1 - spread), "p90_ms": ms * (1 + spread), "round_medians_ms": [ms] * 5,
            "nvml": [{"samples": 10, "sm_clock_mhz": {"min": MHZ, "median": MHZ, "max": MHZ}}] * 5}


def synthetic(times: dict[str, float] | None = None) -> dict:
    """A record shaped like the job's: two dtypes, each copy_ at 1 ms, the rows at the given x own copy_."""
    times = times or {}
    rows = [{"name": "copy_", "mode": "", "timing": timing(2.0), "batch": "bfloat16"}]
    for dtype in analysis.DTYPES:
        names = measure.timed_names(dtype)[1:]
        for name in names:
            x = times.get(name, 1.0 if name.startswith("copy_") else 1.1 + 0.01 * names.index(name))
            rows.append({"name": name, "mode": dtype, "timing": timing(x), "batch": dtype})
    checks = {e.name: {"dtype": e.mode, "inputs": 65536, "alphas": 77, "expect_exact": kernel.checked(e.flags),
                       "mismatches": 0 if kernel.checked(e.flags) else 12, "required_mismatches": 0,
                       "alphas_with_mismatches": 0, "untouched": 0} for e in measure.kernel_entries()}
    backward = {e.name: {"dtype": e.mode, "inputs": 65536, "alphas": 77, "grads": 5, "expect_exact": True,
                         "mismatches": 0, "required_mismatches": 0, "alphas_with_mismatches": 0, "untouched": 0}
                for e in measure.backward_entries()}
    delta = {}
    for f, (lg, eps) in {"Lean": (-18.5, 2.0 ** -17), "Accurate": (-21.7, 2.0 ** -20)}.items():
        d = {t: {"delta": 2.0 ** lg, "delta_log2": lg, "bound": 2.0 ** lg + analysis.ROUNDING, "holds": True,
                 "argmax_x": -0.07, "tiny_differ": 0, "zero_results_equal": True, "binades": [-3, -2, -1],
                 "binade_max_rel": [2.0 ** (lg - 2), 2.0 ** lg, 0.0]} for t in analysis.DTYPES}
        delta[f] = {"eps": eps, "literal": "x", **d}
    counters = [{"name": n, "thread_instructions_per_element": 20.0, "dram_pct_of_peak": 80.0,
                 "warp_instructions": 20.0 * NUMEL / 32, "sm_cycles_per_s": MHZ * 1e6, "duration_ns": 1.2e6}
                for n in checks]
    return {"provenance": {"gpu": "NVIDIA H200", "sm_count": SMS, "date_utc": "2026-11-30T00:00:00", "commit": "x"},
            "problem": {"numel": NUMEL}, "rows": rows, "exhaustive": checks, "exhaustive_backward": backward,
            "delta": delta,
            "fallback": {f: {t: {"warp_pair_slots": 0.1} for t in analysis.DTYPES} for f in delta},
            "formula_of": {n: "Lean" for n in checks}, "counters": {"rows": counters}}


# -- the kernel file ----------------------------------------------------------------------------------------


def test_eps_of_every_formula_is_read_from_the_kernel_file():
    eps = kernel.eps_by_formula()
    assert set(STEP7_DELTA_BUILDS) <= set(eps), "every formula whose delta is measured declares its kEps"
    for formula, e in eps.items():
        assert e["eps"] == kernel.literal_value(e["literal"]) and 0 < e["eps"] < 2.0 ** -10, formula
    assert eps["Lean"] == {"literal": "0x1p-16f", "eps": 2.0 ** -16}


def test_parsing_a_kernel_source():
    text = ("#define ELU7_CHECK 1\n#define ELU7_FORMULA Auto\n"
            "struct A {  // one\n  static constexpr float kEps = 0x1p-17f;\n  static float f(float x) { return x; }\n};\n"
            "struct Auto {};\nstruct B {\n  static constexpr float kEps = 1.5e-6f;\n};\n"
            "template <> struct FormulaOf<__nv_bfloat16, Auto> { using type = A; };\n"
            "template <> struct FormulaOf<__half, Auto> { using type = B; };\n")
    assert kernel.eps_by_formula(text) == {"A": {"literal": "0x1p-17f", "eps": 2.0 ** -17},
                                           "B": {"literal": "1.5e-6f", "eps": 1.5e-6}}
    assert kernel.formula_of((), "bfloat16", text) == "A" and kernel.formula_of((), "float16", text) == "B"
    assert kernel.formula_of(("-DELU7_FORMULA=B",), "bfloat16", text) == "B"
    assert kernel.formula_of(("-DELU7_CHECK=0",), "float16", text) == "expm1f"
    assert kernel.checked((), text) and not kernel.checked(("-DELU7_CHECK=2",), text)
    assert kernel.literal_value("0x1.8p-3f") == 0.1875 and kernel.literal_value("0.5f") == 0.5


def test_every_step7_build_uses_a_formula_whose_delta_is_measured_or_the_table():
    for e in measure.kernel_entries():
        assert kernel.formula_of(e.flags, e.mode) in (*STEP7_DELTA_BUILDS, "expm1f", "Table"), e.name
    assert kernel.formula_of(ENTRIES["7_sixteen_bits bfloat16"].flags, "bfloat16") == "Table"
    assert kernel.formula_of(ENTRIES["7_poly float16"].flags, "float16") == "Mid"


def test_alphas_cover_the_required_ones_and_the_range_edges():
    a = exhaustive.alphas()
    assert a[:6] == [1.0, 0.5, 0.0, -0.7, 1.3, 2.5] and len(a) == 6 + exhaustive.RANDOM_ALPHAS + len(exhaustive.EXTREME_ALPHAS)
    assert a == exhaustive.alphas(), "seeded"
    drawn = a[6:6 + exhaustive.RANDOM_ALPHAS]
    assert all(float(torch.tensor(v, dtype=torch.float32)) == v for v in drawn), "float32 values: one rounding"
    assert {2.0 ** -100, 2.0 ** 100, 2.0 ** -101, 2.0 ** 101} <= set(a)


def test_each_dtype_batch_holds_its_roofs_and_every_step7_row():
    for dtype in analysis.DTYPES:
        names = measure.timed_names(dtype)
        assert names[:2] == ["copy_", f"copy_ {dtype}"] and len(names) == len(set(names))
        assert {e.name for e in STEP7 if e.mode == dtype} <= set(names)
        assert all(ENTRIES[n].mode in ("", dtype) for n in names)


# -- the analysis, on a synthetic record -------------------------------------------------------------------


def test_the_argument_is_delta_plus_three_roundings_within_eps():
    eps = 2.0 ** -17
    assert analysis.argument_holds(2.0 ** -18.5, eps)
    assert analysis.argument_holds(eps - 3 * 2.0 ** -24, eps), "equality is enough"
    assert not analysis.argument_holds(eps - 2 * 2.0 ** -24, eps)


def test_backward_rows_are_timed_over_torch_add_and_have_their_goals():
    rec = synthetic({"7_backward float16": 1.03, "torch.add float16": 1.5})
    assert analysis.x_own_copy(rec, "7_backward float16")[0] == pytest.approx(1.03 / 1.5)
    bw = analysis.frame(rec, "float16", backward=True)
    assert set(bw.index) == {"7_backward", "aten.elu_backward", "torch.add"}
    assert not set(bw.index) & set(analysis.frame(rec, "float16").index)
    goals = analysis.goals_frame(rec)
    assert any("backward" in g for g in goals.index) and "0 mismatches" in set(goals["measured"])
    assert "5 grads" in analysis.exhaustive_verdict(rec)


def test_x_own_copy_is_over_the_same_dtypes_copy():
    rec = synthetic({"7_sixteen_bits float16": 1.04})
    rec["rows"] = [dict(r, timing=timing(r["timing"]["median_ms"] * (2 if r["mode"] == "float16" else 1)))
                   for r in rec["rows"]]  # every float16 time doubled, its copy_ too
    x, p10, p90 = analysis.x_own_copy(rec, "7_sixteen_bits float16")
    assert x == pytest.approx(1.04) and p10 == pytest.approx(1.04 * 0.99) and p90 == pytest.approx(1.04 * 1.01)
    df = analysis.frame(rec, "float16")
    assert list(df["x own copy_"]) == sorted(df["x own copy_"]) and df.index[0] == "copy_"
    assert df.loc["7_unchecked", "mismatches"] == "12" and df.loc["F.elu", "mismatches"] == ""


def test_budget_is_issue_slots_in_copys_time_per_element():
    rec = synthetic()
    b = analysis.budget(rec, "bfloat16")
    assert b["inst_per_elem"] == pytest.approx(SMS * 4 * 32 * MHZ * 1e6 * 1.0e-3 / NUMEL)
    df = analysis.budget_frame(rec)
    assert df.loc["7_sixteen_bits bfloat16", "used %"] == pytest.approx(100 * 20.0 / b["inst_per_elem"])
    issue = analysis.issue_pct(rec, "7_sixteen_bits bfloat16")
    assert issue == pytest.approx(100 * (20.0 * NUMEL / 32) / (SMS * 4 * MHZ * 1e6) / 1.2e-3)
    assert "bfloat16" in analysis.gap_lines(rec) and "issue" in analysis.gap_lines(rec)


def test_predictions_are_graded_against_the_record():
    rec = synthetic({"7_sixteen_bits bfloat16": 1.10, "7_lean bfloat16": 1.12, "7_exact float16": 1.60})
    ps = (Prediction("7_sixteen_bits bfloat16", "x_own_copy", (1.07, 1.15)),
          Prediction("7_lean bfloat16", "x_own_copy", (-0.015, 0.015), base="7_sixteen_bits bfloat16"),
          Prediction("7_exact float16", "x_own_copy", (1.40, 1.50)),
          Prediction("no such entry", "x_own_copy", (1.0, 1.1)),
          Prediction("every checked build", "mismatches", (0, 0)),
          Prediction("7_unchecked float16", "mismatches", (1, math.inf)),
          Prediction("Lean", "delta_log2", (-19.0, -18.0)), Prediction("Lean", "argument", (0, 1)),
          Prediction("Accurate", "argument", (0, 1)))
    verdicts = list(analysis.grade_frame(rec, ps)["verdict"])
    assert verdicts == ["HELD", "MISSED", "MISSED", "NOT MEASURED", "HELD", "HELD", "HELD", "HELD", "HELD"]
    rec["delta"]["Accurate"]["float16"]["tiny_differ"] = 1  # a side condition of the argument broken
    rec["exhaustive"]["7_exact bfloat16"]["mismatches"] = 3
    assert list(analysis.grade_frame(rec, ps[4:5] + ps[8:])["verdict"]) == ["MISSED", "MISSED"]
    assert set(analysis.goals_frame(rec)["verdict"]) <= {"met", "NOT met"}


def test_a_formula_can_be_left_out_of_every_checked_build():
    rec = synthetic()
    rec["formula_of"]["7_lean float16"] = "Other"
    rec["exhaustive"]["7_lean float16"]["mismatches"] = 33
    every = Prediction("every checked build", "mismatches", (0, 0))
    but = Prediction("every checked build", "mismatches", (0, 0), exclude="Other")
    assert analysis.measured(rec, every) == 33 and analysis.measured(rec, but) == 0
    assert analysis.describe(10, 80, "mismatches") == "10 to 80" and analysis.describe(1, math.inf, "mismatches") == (
        "at least 1")
    assert analysis.describe(1.2, 1.6, "argument").startswith("fails")


def test_failures_name_exact_builds_that_differ_not_the_ablation():
    rec = synthetic()
    assert analysis.failures(rec) == []
    rec["exhaustive"]["7_exact float16"]["mismatches"] = 2
    rec["delta"]["Lean"]["bfloat16"]["holds"] = False
    bad = analysis.failures(rec)
    assert any("7_exact float16" in b for b in bad) and any("Lean on bfloat16" in b for b in bad)
    assert not any("7_unchecked" in b for b in bad)
    exact = sum(c["expect_exact"] for c in analysis.checks_of(rec).values())
    assert f"**{exact} of {exact}** builds meant to be exact are all bit-identical" in analysis.exhaustive_verdict(
        synthetic())
    assert f"**{exact - 1} of {exact}**" in analysis.exhaustive_verdict(rec) and "NOT 7_exact float16" in (
        analysis.exhaustive_verdict(rec))


def test_every_prediction_names_a_catalogue_entry_or_a_measured_formula():
    for p in (*PREDICTIONS, *GOALS):
        if p.metric in ("x_own_copy",) or p.base:
            assert p.subject in ENTRIES and (p.base is None or p.base in ENTRIES), p
        elif p.metric in ("delta_log2", "argument"):
            assert p.subject in STEP7_DELTA_BUILDS, p
        else:
            assert p.subject == "every checked build" or p.subject in ENTRIES, p


def test_figures_draw_from_a_record():
    rec = synthetic()
    assert len(figures.xcopy_figure(rec).axes) == 2
    assert len(figures.delta_figure(rec).axes) == 2
    assert len(figures.rounding_figure().axes) == 2


def test_report_without_a_record_draws_nothing(tmp_path):
    assert sixteen.write_report("no-such-gpu") == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message given where there is no GPU")
def test_the_job_says_it_needs_a_gpu(capsys):
    assert sixteen.main([]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err


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
    module = compile_variant(kernel.VARIANT, extra_cuda_cflags=["-DELU7_FILL=0"])
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
    formula = kernel.formula_of(ENTRIES[f"7_poly {dtype}"].flags, dtype)
    variant, flags = STEP7_DELTA_BUILDS[formula]
    d, _, _ = measure.delta_of(compile_variant(variant, extra_cuda_cflags=list(flags)), dtype)
    eps = kernel.eps_by_formula()[formula]["eps"]
    assert d["inputs"] == (32640 if dtype == "bfloat16" else 31744)
    assert analysis.argument_holds(d["delta"], eps), (formula, d["delta_log2"], math.log2(eps))
    assert d["tiny_differ"] == 0 and d["zero_results_equal"]


def test_the_checks_cost_and_the_expm1f_share_are_graded():
    rec = synthetic()
    rec["counters"]["rows"] = [{**k, "thread_instructions_per_element": 24.0} if k["name"] == "7_sixteen_bits bfloat16"
                               else k for k in rec["counters"]["rows"]]
    ps = (Prediction("7_sixteen_bits bfloat16", "check_inst", (3.2, 5.0)),
          Prediction("7_sixteen_bits float16", "check_inst", (3.2, 5.0)),
          Prediction("7_sixteen_bits bfloat16", "fallback_slots", (0.08, 0.125)),
          Prediction("7_sixteen_bits float16", "fallback_slots", (0.2, 0.3)))
    df = analysis.grade_frame(rec, ps)
    assert list(df["verdict"]) == ["HELD", "MISSED", "HELD", "MISSED"]
    assert list(df["measured"]) == ["4.0", "0.0", "10.0 %", "10.0 %"]
    graded = [p for p in PREDICTIONS if p.metric in ("check_inst", "fallback_slots")]
    assert len(graded) == 4 and all(analysis.measured(synthetic(), p) is not None for p in graded)


def test_one_issue_bound_rule_states_itself_and_judges_by_the_issue_share():
    rec = synthetic()
    gap = analysis.gap_lines(rec)
    assert gap.startswith(analysis.ISSUE_BOUND_RULE)
    pct = analysis.issue_pct(rec, "7_sixteen_bits bfloat16")
    verdict = "issue-bound." if hardware.issue_bound(pct) else "not issue-bound."
    assert [line for line in gap.splitlines() if line.startswith("- bfloat16")][0].endswith(verdict)
    line = analysis.expm1f_line(rec)
    assert "whole kernel" in line and "20.0 (bfloat16)" in line
    assert all(len(sentence.split()) <= 40 for sentence in line.split(". "))
    assert compact("| a   | b |\n|:----|---:|") == "| a | b |\n|---|---:|"
