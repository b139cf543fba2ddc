"""Step 7's job (``python -m elu_study sixteen``): what it reads from the kernel file, and the tables notebook 12
shows from the committed record, each computed here again from the record's raw fields and seen to follow a
perturbed record; on a GPU, the suite's guarantee: the default build bit for bit F.elu on every 16-bit input at
the issue's six alphas."""

from __future__ import annotations

import copy
import statistics

import matplotlib
import pandas as pd
import pytest
import torch

from elu_study.core import exhaustive, fingerprint, record, sass
from elu_study.core.build import built_library, compile_variant
from elu_study.core.entries import ENTRIES, STEP7
from elu_study.jobs.sixteen import analysis, figures, measure, notebook

matplotlib.use("Agg")
gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: runs the kernel on every input")
# The rows timed over the dtype's torch.add: every 7_backward build (7_backward_table ...), aten's, torch.add itself.
BACKWARD_PREFIXES = ("7_backward", "aten.elu_backward", "torch.add")


def backward_row(name: str) -> bool:
    return name.split()[0].startswith(BACKWARD_PREFIXES)


pytestmark = pytest.mark.usefixtures("as_of_this_tree")  # grades without the "(earlier build)" label (tested apart)


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
def test_a_grade_or_goal_of_a_row_whose_kernel_build_changed_says_so(rec, monkeypatch):
    """The prediction's and the goals' verdicts on a row built since its record say "(earlier build)"."""
    monkeypatch.setattr(fingerprint, "earlier_variants", lambda r: {"7_sixteen_bits"})
    graded, goals = analysis.graded_frame(rec), analysis.goals_frame(rec)
    assert all(v.endswith("(earlier build)") for v in graded["verdict"]) and len(graded) == len(analysis.PREDICTION)
    assert all(v.endswith("(earlier build)") for v in goals["verdict"])
    monkeypatch.setattr(fingerprint, "earlier_variants", lambda r: {"6_beyond_copy"})  # another kernel file's
    assert not any(v.endswith("(earlier build)") for v in analysis.graded_frame(rec)["verdict"])
    assert not any(v.endswith("(earlier build)") for v in analysis.goals_frame(rec)["verdict"])




def test_parsing_a_kernel_source():
    text = ("#define ELU7_CHECK 1\n#define ELU7_FORMULA Auto\n"
            "struct A {  // one\n  static constexpr float kEps = 0x1p-17f;\n};\nstruct Auto {};\nstruct B {};\n"
            "template <> struct FormulaOf<__nv_bfloat16, Auto> { using type = A; };\n"
            "template <> struct FormulaOf<__half, Auto> { using type = B; };\n")
    assert measure.formula_of((), "bfloat16", text) == "A" and measure.formula_of((), "float16", text) == "B"
    assert measure.formula_of(("-DELU7_FORMULA=B",), "bfloat16", text) == "B"
    assert measure.formula_of(("-DELU7_CHECK=0",), "float16", text) == "expm1f"
    assert measure.knob((), "CHECK", text) == "1" and measure.knob(("-DELU7_CHECK=2",), "CHECK", text) == "2"


def test_the_kernel_file_still_says_what_the_record_counted(rec):
    """Each forward build's formula, read from the file now, against the kernel whose SASS the record holds: the
    table's exactly where the file resolves the build to Table; each same-kernel pair one formula and one check."""
    for e in STEP7:  # those the record measured: an entry added since is not counted yet
        if e.variant == measure.VARIANT and not backward_row(e.name) and e.name in rec["sass16"]:
            table = measure.formula_of(e.flags, e.mode) == "Table"
            assert table == (rec["sass16"][e.name]["kernel"] == "table16_kernel"), e.name
    for a, b in analysis.SAME_KERNEL:
        ea, eb = ENTRIES[a], ENTRIES[b]
        assert ea.mode == eb.mode and measure.formula_of(ea.flags, ea.mode) == measure.formula_of(eb.flags, eb.mode)
        assert measure.knob(ea.flags, "CHECK") == measure.knob(eb.flags, "CHECK")
        assert rec["sass16"][a]["opcodes"] == rec["sass16"][b]["opcodes"]


def test_the_float16_table_loop_reads_its_table_without_recomputing_its_address():
    """The default's element loops (float16: the cp.async fill, the first load in flight) read a table entry on every
    lane, then select: no special-register read (S2R) in them. The one change back to a predicated read
    (7_predicated_lookup) puts the table's shared-memory address (S2R SR_CgaCtaId, then MOV and LEA) back before
    each of the loop's 8 loads, as kernels/7_sixteen_bits.cu says of ELU7_LOOKUP. Code generation: the nvcc that
    builds here (13.0, sm_90)."""
    def async_loop(name: str) -> list[str]:  # the loop that stores, reads the table and guards its next load (BSSY)
        body = sass.named(sass.loops(built_library(ENTRIES[name].build())), "table16_kernelI6__half")
        (loop,) = [b for b in body if "LDS" in b and "BSSY" in b and any(op.startswith("STG") for op in b)]
        return loop

    default, predicated = async_loop("7_sixteen_bits float16"), async_loop("7_predicated_lookup float16")
    assert "S2R" not in default and default.count("LDS") == 8
    assert predicated.count("S2R") == 8 == predicated.count("LDS")
    assert len(predicated) - len(default) >= 3 * 8  # 3 or more instructions more per element


def test_the_16_bit_backward_computes_expf_on_every_lane_without_a_branch_per_element():
    """The default backward (from x) has no branch per element: its only divergence-handling region (BSSY) guards
    the bounds; 7_backward_branch, the one change back to expf behind "x <= 0", opens one per element (8)."""
    def kernel(name: str, token: str) -> list[str]:
        return sass.named(sass.sass_by_function(built_library(ENTRIES[name].build())), f"backward16_exp_kernelI{token}")

    for dtype, token in measure.DTYPE_TOKEN.items():
        default, branch = kernel(f"7_backward {dtype}", token), kernel(f"7_backward_branch {dtype}", token)
        assert default.count("BSSY") <= 1 and branch.count("BSSY") >= 8, dtype
        assert default.count("MUFU.EX2") == branch.count("MUFU.EX2") == 8  # expf on every element either way


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


def test_the_prediction_and_the_goals_name_catalogue_entries():
    for name in (*(n for n, _ in analysis.PREDICTION), *analysis.GOALS, *(n for p in analysis.SAME_KERNEL for n in p),
                 *analysis.SUSTAINED_PREDICTION, *measure.PROFILED):
        assert name in ENTRIES, name


# -- the record's numbers, as notebook 12 shows them ------------------------------------------------------


def gap(r: dict) -> float:
    return max(abs(over_roof(r, a) - over_roof(r, b)) for a, b in analysis.SAME_KERNEL)


def spread(r: dict, name: str) -> float:
    """A row's spread of round medians over its roof's median, from the raw rows."""
    dtype, t = name.split()[-1], next(x for x in r["rows"] if x["name"] == name)["timing"]
    return (max(t["round_medians_ms"]) - min(t["round_medians_ms"])) / median(
        r, f"{'torch.add' if backward_row(name) else 'copy_'} {dtype}")


def half_band(r: dict, name: str) -> float:
    """Half a row's p10-p90 over its roof's median, from the raw rows."""
    dtype, t = name.split()[-1], next(x for x in r["rows"] if x["name"] == name)["timing"]
    return (t["p90_ms"] - t["p10_ms"]) / 2 / median(r, f"{'torch.add' if backward_row(name) else 'copy_'} {dtype}")


def test_each_one_change_row_is_over_its_own_roof_beside_its_base(rec):
    """Each one-change row beside its base, a tie inside the resolution (two rows of one kernel), inside either
    row's own spread of round medians or inside either row's half p10-p90."""
    df, res = analysis.tried_frame(rec), gap(rec)
    based = [r for r in rec["rows"] if r["name"].startswith("7_") and (r.get("base") or "").startswith("7_")]
    assert list(df.index) == [r["name"] for r in based]
    for r in based:
        line, x, xb = df.loc[r["name"]], over_roof(rec, r["name"]), over_roof(rec, r["base"])
        tie = max(res, spread(rec, r["name"]), spread(rec, r["base"]), half_band(rec, r["name"]),
                  half_band(rec, r["base"]))
        assert (line["x own roof"], line["difference"], line["tie within"]) == pytest.approx((x, x - xb, tie))
        assert line["base"] == r["base"]
        assert line["verdict"] == ("tie" if abs(x - xb) < tie else "faster" if x < xb else "slower")
        c = {**rec["exhaustive"], **rec["exhaustive_backward"]}[r["name"]]
        assert (line["bit-exact"] == "yes") == (c["mismatches"] == 0 == c["untouched"])
    assert df.loc["7_unchecked float16", "bit-exact"].startswith("NO")
    # a row at its base's ratio is a tie, and stops being one when it moves by more than the resolution
    pairs = {n for pair in analysis.SAME_KERNEL for n in pair}  # rows that set the resolution: moving one moves it
    name = next(n for n in df.index if not backward_row(n) and n not in pairs)
    x, xb = over_roof(rec, name), over_roof(rec, df.loc[name, "base"])
    assert analysis.tried_frame(scaled(rec, name, xb / x)).loc[name, "verdict"] == "tie"
    moved = xb + 2 * max(gap(rec), *(f(rec, n) for f in (spread, half_band) for n in (name, df.loc[name, "base"])))
    assert analysis.tried_frame(scaled(rec, name, moved / x)).loc[name, "verdict"] == "slower"


def test_the_resolution_is_two_rows_of_one_kernel_round_by_round(rec):
    df = analysis.resolution_frame(rec)
    for a, b in analysis.SAME_KERNEL:
        line = df.loc[f"{a} / {b}"]
        assert line["gap"] == pytest.approx(abs(over_roof(rec, a) - over_roof(rec, b)))
        assert line["same opcodes (sass16)"] == "yes"
    assert df["gap"].max() == pytest.approx(gap(rec))
    a, b = analysis.SAME_KERNEL[0]
    staged = copy.deepcopy(rec)  # five rounds: (a's ms, b's ms, a's MHz, b's MHz)
    rounds = [(1.0, 1.1, 1980, 1965), (1.0, 1.1, 1980, 1980), (1.1, 1.0, 1965, 1980), (1.0, 1.1, 1965, 1980),
              (1.0, 1.0, 1980, 1980)]  # hit; equal clocks; hit; faster at the lower clock; a tie at one clock
    for n, i in ((a, 0), (b, 1)):
        t = next(x for x in staged["rows"] if x["name"] == n)["timing"]
        t["round_medians_ms"] = [r[i] for r in rounds]
        for s, r in zip(t["nvml"], rounds):
            s["sm_clock_mhz"]["median"] = float(r[2 + i])
    assert analysis.resolution_frame(staged).loc[f"{a} / {b}", "faster at the higher clock"] == \
        "2 of 3 rounds with different clocks"
    level = copy.deepcopy(rec)  # every round at one clock: no round tells which row the clock favoured
    for r in level["rows"]:
        for s in r["timing"]["nvml"]:
            s["sm_clock_mhz"]["median"] = 1980.0
    assert analysis.resolution_frame(level).loc[f"{a} / {b}", "faster at the higher clock"] == \
        "0 of 0 rounds with different clocks"


def test_a_slower_default_changes_the_grades_and_the_goals(rec):
    name = "7_sixteen_bits float16"
    before, slow = over_roof(rec, name), scaled(rec, name, 1.5)
    after = over_roof(slow, name)
    assert after == pytest.approx(1.5 * before)
    graded, goals = analysis.graded_frame(slow).reset_index(), analysis.goals_frame(slow)
    line = graded[(graded["entry"] == name) & (graded["what"] == "x own copy_")].iloc[0]
    assert line["measured"] == f"{after:.3f}" and line["verdict"] == "MISSED"
    assert goals.loc[name, "x own roof"] == pytest.approx(after) and goals.loc[name, "verdict"] == "NOT met"
    fast = analysis.goals_frame(scaled(rec, name, 0.99 / before))  # at 0.99: under the aim
    assert fast.loc[name, "verdict"] == "aim met"


@pytest.mark.parametrize("runs, aim, must, grade", [
    ((0.970, 0.975), 1.0, 1.01, "aim met"), ((0.998, 1.002), 1.0, 1.01, "tie at the aim"),
    ((1.0015, 1.003), 1.0, 1.01, "tie at the aim"),  # over the aim, but within the tie of it
    ((1.004, 1.006), 1.0, 1.01, "must met"), ((1.008, 1.012), 1.0, 1.01, "tie at the must"),
    ((1.02, 1.03), 1.0, 1.01, "NOT met"), ((0.995, 1.015), 1.0, 1.01, "tie at the aim and the must"),
    ((0.999, 1.001), 1.0, 1.0, "tie at the aim and the must"),  # bfloat16's aim is its must
])
def test_the_goals_call_a_bar_between_two_runs_or_within_their_tie_a_tie(runs, aim, must, grade):
    assert notebook.goals_verdict(list(runs), aim, must, tie=0.002) == grade


def test_the_goals_pool_the_main_records_run_only_where_both_ran_this_trees_build(rec, monkeypatch):
    """Notebook 12's goals: each default's short run here and in the main record, graded together; a record of an
    earlier build (either) holds another kernel: this record's run is graded alone, and says so."""
    name, main = "7_sixteen_bits float16", record.load(record.REFERENCE_GPU)
    goals = notebook.goals(rec, main)
    assert goals.loc[name, "main record's"] == pytest.approx(over_roof(main, name))
    assert goals.loc[name, "x own roof"] == pytest.approx(over_roof(rec, name))
    tie = goals.loc[name, "tie within"]
    assert tie >= max(analysis.spread(r, name) for r in (rec, main))
    must = analysis.GOALS[name][1]
    slow = scaled(main, name, (must + 3 * tie) / over_roof(main, name))  # the main run over the must, this one not
    assert over_roof(rec, name) < must and notebook.goals(rec, slow).loc[name, "verdict"].startswith("tie at the")
    for stale in (rec, slow):  # either record of an earlier build of step 7: not pooled
        monkeypatch.setattr(fingerprint, "earlier_variants", lambda r, s=stale: {"7_sixteen_bits"} if r is s else set())
        alone = notebook.goals(rec, slow)
        assert pd.isna(alone.loc[name, "main record's"])
        assert alone.loc[name, "verdict"].endswith("(earlier build)") == (stale is rec)


def test_the_notebooks_prediction_table_calls_a_time_within_the_runs_resolution_of_its_range_a_tie(rec):
    name = "7_sixteen_bits float16"
    lo, hi = analysis.PREDICTION[(name, "x own copy_")]
    tie = notebook.goals(rec, rec).loc[name, "tie within"]  # the same rule: this record's resolution and the row's

    def verdict(x: float) -> str:
        table = notebook.graded(scaled(rec, name, x / over_roof(rec, name))).reset_index()
        return table[(table["entry"] == name) & (table["what"] == "x own copy_")].iloc[0]["verdict"]

    assert verdict(hi + tie / 2) == verdict(lo - tie / 2) == "TIE (within the run's resolution)"
    assert verdict(hi + 3 * tie) == "MISSED" and verdict(lo - 3 * tie) == "MISSED (faster)" and verdict(lo) == "HELD"


def test_the_notebooks_table_of_attempts_holds_every_one_change_row_once_its_dtypes_side_by_side(rec):
    rows, table = analysis.tried_frame(rec), notebook.tried(rec)
    assert len(table) == len({n.rsplit(" ", 1)[0] for n in rows.index})
    for name, line in rows.iterrows():
        attempt, dtype = name.rsplit(" ", 1)
        assert table.loc[attempt, f"{dtype}: x own roof"] == pytest.approx(line["x own roof"])
        assert table.loc[attempt, f"{dtype}: vs base"].startswith(f"{line['difference']:+.4f} {line['verdict']} (tie ")


def test_the_prediction_is_graded_on_its_own_range(rec):
    """HELD exactly where the value lies in the range written; each row follows its own value only."""
    inst = {c["name"]: c["thread_instructions_per_element"] for c in rec["counters"]["rows"]}
    checks = {**rec["exhaustive"], **rec["exhaustive_backward"]}
    value = {"x own copy_": over_roof, "inst/elem": lambda r, n: inst[n], "mismatches": lambda r, n: checks[n]["mismatches"]}
    graded = analysis.graded_frame(rec)
    assert len(graded) == len(analysis.PREDICTION) == 6
    for ((name, what), (lo, hi)), verdict in zip(analysis.PREDICTION.items(), graded["verdict"]):
        v = value[what](rec, name)
        assert verdict == ("HELD" if lo <= v <= hi else "MISSED (faster)" if what == "x own copy_" and v < lo
                           else "MISSED"), (name, what)
    broken = copy.deepcopy(rec)  # one mismatch on float16: its row misses, the others stay
    broken["exhaustive"]["7_sixteen_bits float16"]["mismatches"] = 1
    after = analysis.graded_frame(broken)["verdict"]
    changed = [k for k, (x, y) in enumerate(zip(graded["verdict"], after)) if x != y]
    assert [list(analysis.PREDICTION)[k] for k in changed] == [("7_sixteen_bits float16", "mismatches")]
    assert list(after)[changed[0]] == "MISSED"


def test_the_budget_is_issue_slots_in_copys_time_per_element(rec):
    sms, numel, df = rec["provenance"]["sm_count"], rec["problem"]["numel"], analysis.budget_frame(rec)
    assert set(df.index) == {c["name"] for c in rec["counters"]["rows"]}
    for dtype in analysis.DTYPES:
        mhz = statistics.median(s["sm_clock_mhz"]["median"] for r in rec["rows"] if r["mode"] == dtype
                                for s in r["timing"]["nvml"] if s["samples"])
        per = sms * 4 * 32 * mhz * 1e6 * median(rec, f"copy_ {dtype}") * 1e-3 / numel
        k = next(c for c in rec["counters"]["rows"] if c["name"] == f"7_sixteen_bits {dtype}")
        line = df.loc[f"7_sixteen_bits {dtype}"]
        assert (line["SM MHz"], line["budget inst/elem"]) == pytest.approx((mhz, per))
        assert line["used %"] == pytest.approx(100 * k["thread_instructions_per_element"] / per)
    slow = analysis.budget_frame(scaled(rec, "copy_ bfloat16", 1.5))  # a slower roof: half as many again fit in it
    assert slow.loc["7_poly bfloat16", "budget inst/elem"] == pytest.approx(1.5 * df.loc["7_poly bfloat16",
                                                                                          "budget inst/elem"])


def test_the_issue_share_is_warp_instructions_at_four_per_sm_per_cycle(rec):
    df, sms = analysis.budget_frame(rec), rec["provenance"]["sm_count"]
    for k in rec["counters"]["rows"]:
        pct = 100 * k["warp_instructions"] / (sms * 4 * k["sm_cycles_per_s"]) / (k["duration_ns"] * 1e-9)
        assert df.loc[k["name"], "issue %"] == pytest.approx(pct)
        assert df.loc[k["name"], "issue-bound"] == ("yes" if round(pct) >= 90 else "no")
    assert df.loc["7_exact float16", "issue-bound"] == "yes" and df.loc["7_sixteen_bits float16", "issue-bound"] == "no"
    fewer = copy.deepcopy(rec)
    for k in fewer["counters"]["rows"]:
        if k["name"].startswith("7_exact"):
            k["warp_instructions"] /= 2
    assert set(analysis.budget_frame(fewer)["issue-bound"]) == {"no"}


def test_the_exhaustive_table_counts_every_check(rec):
    checks = {**rec["exhaustive"], **rec["exhaustive_backward"]}
    df = analysis.exhaustive_frame(rec)
    assert df["builds"].sum() == len(checks) and df["mismatches"].sum() == sum(c["mismatches"] for c in checks.values())
    forward = [c for c in rec["exhaustive"].values() if c["expect_exact"]]
    assert df.loc["exact by design, forward", "builds"] == len(forward)
    assert df.loc["exact by design, backward", "builds"] == len(rec["exhaustive_backward"])
    assert df.loc["triton bfloat16", "mismatches"] == rec["exhaustive"]["triton bfloat16"]["mismatches"]
    assert analysis.failures(rec) == []
    broken = copy.deepcopy(rec)
    broken["exhaustive"]["7_exact float16"]["mismatches"] = 3
    df = analysis.exhaustive_frame(broken)
    assert df.loc["exact by design, forward", "bit-identical"] == len(forward) - 1
    assert df.loc["exact by design, forward", "mismatches"] == 3
    assert analysis.failures(broken) == ["7_exact float16"]


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
