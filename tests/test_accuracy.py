"""The exhaustive accuracy study: its arithmetic (ulps, bins, the reference) on the CPU, its pipeline with CPU
stand-ins for the kernels, what notebook 07 prints from the committed record (each number computed here again from
the record, and each cell seen to change when the record does), and the kernels on a GPU."""

import copy
import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from elu_study.core import record, text
from elu_study.jobs.accuracy import analysis, definitions, figures, measure, reference
from elu_study.jobs.accuracy.notebook import CLAIMS, MINUS1, cell

INF = math.inf
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(),
                               reason="needs a CUDA GPU: runs the built kernels on every input of a range")


def f32(*values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32)


def f64(*values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def bits(t: torch.Tensor) -> list[int]:
    return [b & 0xFFFFFFFF for b in reference.bits32(t).tolist()]


# -- ulps ---------------------------------------------------------------------------------------
def test_ulp32_is_the_float32_spacing_of_the_binade():
    assert reference.ulp32(f64(1.0, 1.5, -3.0, 2.0**-126, 2.0**-130, 0.0, -0.0)).tolist() == [
        2.0**-23, 2.0**-23, 2.0**-22, 2.0**-149, 2.0**-149, 2.0**-149, 2.0**-149]
    g = torch.Generator().manual_seed(0)
    v = reference.from_bits(torch.randint(0x00800000, 0x7F7FFFFF, (10_000,), generator=g).tolist())  # positive normals
    up = torch.nextafter(v, torch.full_like(v, INF))
    assert torch.equal(reference.ulp32(v.double()), (up.double() - v.double()))
    assert torch.equal(reference.ulp32(-v.double()), reference.ulp32(v.double()))


def test_ulp_error_known_values():
    r = f32(1.5, -0.75, -3 * 2.0**-149, 1e-20, -1e30)
    up = torch.nextafter(r, torch.full_like(r, INF))
    down = torch.nextafter(r, torch.full_like(r, -INF))
    assert reference.ulp_error(up, r.double()).tolist() == [1.0] * 5  # one step off: 1 ulp
    assert reference.ulp_error(down, r.double()).tolist() == [1.0] * 5  # (no binade edge among these)
    assert reference.ulp_error(r, r.double()).tolist() == [0.0] * 5
    # Below a power of 2 the spacing halves: one step down from 1.0 is half an ulp of 1.0.
    assert reference.ulp_error(f32(float(np.nextafter(np.float32(1), np.float32(0)))), f64(1.0)).item() == 0.5
    # Against a float64 value: the distance in float32 ulps of its binade.
    assert reference.ulp_error(f32(1.0), f64(1.0 + 2.0**-25)).item() == 0.25


def test_ulp_error_special_values():
    nan = float("nan")
    y = f32(nan, nan, 1.0, INF, -INF, 1.0, 0.0, -0.0)
    ref = f64(nan, 1.0, nan, INF, INF, INF, -0.0, 0.0)
    assert reference.ulp_error(y, ref).tolist() == [0.0, INF, INF, 0.0, INF, INF, 0.0, 0.0]


# -- bins and binades ---------------------------------------------------------------------------
def test_histogram_bins():
    err = f64(0.0, 1e-300, 0.5, 0.5000001, 1.0, 1.5, 2.0, 3.0, 2.0**31, 2.0**31 + 1, INF, 0.7)
    nan_mismatch = torch.tensor([False] * 11 + [True])
    labels = [definitions.HIST_LABELS[i] for i in reference.histogram_bins(err, nan_mismatch).tolist()]
    assert labels == ["0", "(0, 0.5]", "(0, 0.5]", "(0.5, 1]", "(0.5, 1]", "(1, 2]", "(1, 2]", "(2, 4]",
                      "(2^30, 2^31]", "> 2^31 or inf", "> 2^31 or inf", "NaN vs number"]


def test_classes():
    x = reference.from_bits([0x3F800000, 0xBF800000, 0x00000001, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000,
                             0xFFC00000, 0x00000000, 0x807FFFFF, 0x00800000])
    assert [definitions.CLASSES[c] for c in reference.classify(x).tolist()] == [
        "+normal", "-normal", "+denormal", "-0.0", "+inf", "-inf", "NaN", "NaN", "+0.0", "-denormal", "+normal"]


def test_patterns_enumerate_bit_patterns_in_int32_order():
    assert bits(reference.patterns(-(2**31), -(2**31) + 2)) == [0x80000000, 0x80000001]
    assert bits(reference.patterns(2**31 - 2, 2**31)) == [0x7FFFFFFE, 0x7FFFFFFF]
    assert bits(reference.patterns(-1, 1)) == [0xFFFFFFFF, 0x00000000]
    with pytest.raises(ValueError):
        reference.patterns(0, 2**31 + 1)


# -- the reference ------------------------------------------------------------------------------
def test_exact_ties_at_tiny_x_round_toward_zero():
    # alpha * x = -1.5 * 2^-149 is a float32 midpoint, and so is float64 ELU; the exact value
    # alpha * (exp(x) - 1) lies just toward zero of it, so -2^-149 is right, not round-to-even's -2^-148.
    x = f32(-(2.0**-149), -3 * 2.0**-149, -(1 + 2.0**-23) * 2.0**-100)
    ref = reference.reference(x, 1.5)
    assert ref.tie.tolist() == [True, True, True]
    assert ref.ref32[:2].tolist() == [-(2.0**-149), -4 * 2.0**-149]
    assert ref.ref32.tolist() == [float(reference.correctly_rounded_elu(v, 1.5)) for v in x.tolist()]
    assert reference.bits32(ref.ref32)[0] != reference.bits32(ref.ref64.float())[0]  # float64-then-round is wrong there
    assert not reference.reference(x, 1.0).near.any()  # with alpha = 1, x itself is a float32


def test_reference_is_correctly_rounded_on_a_sample():
    x = reference.reference_sample(n=400, seed=1)
    for alpha in definitions.ALPHAS:
        ref = reference.reference(x, alpha)
        reference.resolve(x, ref, alpha)
        want = [float(reference.correctly_rounded_elu(v, alpha)) for v in x.tolist()]
        assert ref.ref32.tolist() == want


def test_resolve_rounds_the_exact_value():
    x = reference.reference_sample(n=200, seed=2)
    ref = reference.reference(x, 1.5, margin=2.0**40)  # mark every input as near a midpoint
    out = reference.resolve(x, ref, 1.5)
    assert out["resolved"] == int(ref.todo.sum()) > 0 and out["unresolved"] == 0
    assert out["max_err_ulp64"] < 4  # CPU float64 expm1 is within a few float64 ulps
    assert ref.ref32.tolist() == [float(reference.correctly_rounded_elu(v, 1.5)) for v in x.tolist()]


def test_nearest_float32_of_exact_values():
    assert reference.correctly_rounded_elu(-(2.0**-149), 1.0) == np.float32(-(2.0**-149))
    assert reference.correctly_rounded_elu(-INF, 1.5) == np.float32(-1.5)
    assert reference.correctly_rounded_elu(INF, 1.5) == np.float32(INF)
    assert reference.correctly_rounded_elu(-1.0, 1.0) == np.float32(math.expm1(-1.0))
    assert reference.correctly_rounded_elu(-0.0, 1.0) == 0


# -- the bound carried through ELU ---------------------------------------------------------------
def test_predicted_ulp():
    x = f32(-1.0, -(2.0**-10), 1.0, 2.0**-140, float("nan"))
    ref64 = F.elu(x.double())
    # CUDA's B ulp count from the correctly rounded result: B + 1/2 from the exact value.
    expm1f = reference.predicted_ulp(x, ref64, 1.0, definitions.FORMULAS[2])
    assert expm1f.tolist() == [1.5, 1.5, 0.0, 0.0, 0.0]
    expf = reference.predicted_ulp(x, ref64, 1.0, definitions.FORMULAS[0])
    assert expf[1].item() == 2.5 * 2.0**-24 / 2.0**-34  # cancellation: exp's ulps of 1 over ulp(2^-10)
    assert expf[0].item() == pytest.approx(2.5 * 2.0**-25 / 2.0**-24 + 0.5)  # e^-1 < 1/2: the subtraction rounds
    fast = reference.predicted_ulp(x, ref64, 1.0, definitions.FORMULAS[1])
    assert fast[3].item() == 2.0**9  # a flushed positive denormal loses all of x: 2^-140 / 2^-149 ulps
    alpha_product = reference.predicted_ulp(x, ref64, 1.5, definitions.FORMULAS[2])
    assert alpha_product[0].item() == 1.5 * 1.5 + 0.5  # alpha's product rounds
    # Near a binade edge the larger ulp: exp(x) just below 1/2 is counted in ulps of [1/2, 1).
    below_half = f32(math.log(0.5) - 1e-7)
    assert reference.bound_parts(below_half, F.elu(below_half.double()))["ulp_e"].item() == 2.0**-24


# -- the pipeline, with CPU stand-ins for the kernels ---------------------------------------------
def _naive(x, a):
    return torch.where(x > 0, x, a * (torch.exp(x) - 1))


STANDINS = {"1_naive": _naive, "2_float4": _naive, "F.elu": lambda x, a: F.elu(x, a)}
NEG_DENORMALS = (-(2**31), -(2**31) + definitions.BINADE)  # -0.0 and every negative denormal


@pytest.fixture(scope="module")
def cpu_record():
    formulas = tuple(f for f in definitions.FORMULAS if f.name in STANDINS)
    body = measure.measure((1.0, 1.5), formulas, {"2_float4": "1_naive"}, ranges=[NEG_DENORMALS],
                           device="cpu", evaluators=STANDINS, progress=False)
    provenance = {"gpu": "CPU stand-ins", "driver": None, "cuda_runtime": None, "torch": torch.__version__,
                  "nvcc": None, "date_utc": "2000-01-01T00:00:00+00:00"}
    return json.loads(record.dumps(record.stamped({"provenance": provenance, **body}, "accuracy")))


def test_pipeline_counts_every_input_once(cpu_record):
    n = definitions.BINADE
    assert cpu_record["method"]["n_inputs"] == n and not cpu_record["method"]["every_input"]
    for alpha in ("1.0", "1.5"):
        run = cpu_record["runs"][alpha]
        assert run["same_as"] == {"2_float4": {"as": "1_naive", "n_differ": 0}}
        for s in run["formulas"].values():
            assert s["n"] == n and sum(s["histogram"]["negative"]) == n and sum(s["histogram"]["positive"]) == 0
            assert sum(c["n"] for label, c in s["classes"].items() if label != definitions.DENORMAL_OUTPUT) == n
            assert len(s["binades_negative"]["max_ulp"]) == 256
            assert s["tolerance"]["n_checked"] == n and s["tolerance"]["n_fail"] == 0
        felu = run["formulas"]["F.elu"]
        assert felu["bit_identical_to_felu"] == n and felu["bound"]["n_exceed"] == 0
        naive = run["formulas"]["1_naive"]
        # exp(x) rounds to 1 for every denormal x: every output is +0.0, all of x lost.
        assert naive["classes"]["-denormal"]["plus_zero_out"] == n - 1
        assert naive["max_ulp"]["negative"]["at"]["x_bits"] == "0x807fffff"
    r15 = cpu_record["runs"]["1.5"]["reference"]
    assert r15["exact_ties_tiny_x"] == n // 2 and r15["tie_check"]["disagree"] == 0
    # F.elu rounds alpha * x to even at those ties: right for half of them.
    assert cpu_record["runs"]["1.5"]["formulas"]["F.elu"]["correctly_rounded"] == n - r15["ties_corrected"]


def test_signed_zero_is_counted_apart_from_the_error(cpu_record):
    s = cpu_record["runs"]["1.0"]["formulas"]["1_naive"]  # exp(-0.0) - 1 = +0.0, where F.elu gives -0.0
    assert s["zero_sign_mismatch"] == 1
    assert s["classes"]["-0.0"] == {"n": 1, "correctly_rounded": 0, "identical_to_felu": 0, "nan_out": 0,
                                    "plus_zero_out": 1, "minus_zero_out": 0, "equal_input": 0, "max_ulp": 0.0}
    assert cpu_record["runs"]["1.0"]["formulas"]["F.elu"]["classes"]["-0.0"]["minus_zero_out"] == 1


def test_record_json_is_strict(cpu_record):
    json.loads(record.dumps(cpu_record), parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))


def test_run_summary_prints_the_run(cpu_record):
    """What ``main`` prints after a run: one line per formula and alpha, then steps 2-3 and the reference."""
    lines = text.render("accuracy/run.md.j2", rec=cpu_record, path=record.record_path("cpu", "accuracy")).splitlines()
    felu = cpu_record["runs"]["1.5"]["formulas"]["F.elu"]
    line = next(s for s in lines if s.startswith("alpha  1.5 F.elu "))
    assert f"max {felu['max_ulp']['negative']['ulp']:.4g} ulp" in line
    assert f"correctly rounded: {100 * felu['correctly_rounded'] / felu['n']:.4f}%" in line
    assert "alpha  1.0 2_float4 differs from 1_naive on 0 inputs" in lines
    assert lines[-1].startswith(f"{definitions.BINADE} inputs x 2 alphas")
    no_gpu = text.render("accuracy/run.md.j2", rec=None, path=record.record_path(record.REFERENCE_GPU, "accuracy"))
    assert "needs a CUDA GPU" in no_gpu and f"{record.REFERENCE_GPU}-accuracy.json" in no_gpu


def test_merge_identical_joins_equal_columns():
    import pandas as pd

    df = pd.DataFrame({"a": [1, 2], "b": [1, 2], "c": [1, 3]})
    assert list(analysis.merge_identical(df).columns) == ["a = b", "c"]


def test_pct_never_rounds_to_all_or_nothing():
    assert analysis.pct(5, 5) == "100 %" and analysis.pct(0, 5) == "0 %" and analysis.pct(1, 3) == "33.3 %"
    assert analysis.pct(2**32 - 1, 2**32) == "99.99999998 %" and analysis.pct(1, 2**32) == "0.00000002 %"


# -- the committed record, as notebook 07 prints it ------------------------------------------------
@pytest.fixture(scope="module")
def committed():
    path = record.record_path(record.REFERENCE_GPU, "accuracy")
    if not path.exists():
        pytest.skip(f"{path.name} is not committed yet (python -m elu_study accuracy writes it on the GPU)")
    return record.load(job="accuracy")  # checks the schema stamp


@pytest.fixture
def changed(committed):
    """A deep copy of the committed record, to change in memory."""
    return copy.deepcopy(committed)


def row(shown: str, first: str, *more: str) -> list[str]:
    """The cells of the pipe-table row whose first cells are ``first`` (and ``more``)."""
    for line in shown.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if cells[:1 + len(more)] == [first, *more]:
            return cells
    raise AssertionError(f"no row {first!r} {more} in:\n{shown}")


def formula(rec: dict, alpha: str, name: str) -> dict:
    return rec["runs"][alpha]["formulas"][name]


def test_committed_record_counts_every_input_once(committed):
    m = committed["method"]
    assert m["every_input"] and m["n_inputs"] == 2**32 and m["histogram_labels"] == list(definitions.HIST_LABELS)
    assert {k: m[k] for k in definitions.METHOD} == definitions.METHOD  # the method's words are the code's
    for alpha in map(repr, m["alphas"]):
        run = committed["runs"][alpha]
        assert list(run["formulas"]) == [f.name for f in definitions.FORMULAS]
        for s in run["formulas"].values():
            assert sum(s["histogram"]["negative"]) == sum(s["histogram"]["positive"]) == 2**31 == s["n"] // 2
            assert s["tolerance"]["n_checked"] == 2**32 - 2**24  # every finite input
            assert sum(c["n"] for label, c in s["classes"].items() if label != definitions.DENORMAL_OUTPUT) == 2**32
        assert run["reference"]["unresolved"] == 0


def test_intro_names_the_run_and_the_formulas(committed, changed, monkeypatch):
    shown = cell("intro", committed, measured_here=False)
    p, m = committed["provenance"], committed["method"]
    assert shown.startswith("Data source: ") and f"commit {p['commit']}: all 2^32 float32 inputs" in shown
    assert f"in {m['seconds']} s (peak GPU memory {m['peak_gpu_memory_gib']} GiB)" in shown
    assert row(shown, "4_fast_math")[2] == "__expf: 2 + floor(\\|1.173 x\\|) ulp"  # the | escaped in the table
    assert [row(shown, f["name"])[1] for f in committed["formulas"]] == [f["what"] for f in committed["formulas"]]
    from dataclasses import replace

    from elu_study.core.entries import ENTRIES  # a step added to the catalogue after the run leaves the intro as it was
    monkeypatch.setitem(ENTRIES, "8_new_step", replace(ENTRIES["2_float4"], name="8_new_step"))
    assert cell("intro", committed, measured_here=False) == shown
    changed["method"]["seconds"] = m["seconds"] * 1.5
    assert f"in {m['seconds'] * 1.5} s" in cell("intro", changed, measured_here=False)


def test_predictions_are_graded_from_the_record(committed, changed):
    shown = cell("predictions", committed)
    groups = {g for g, *_ in CLAIMS}
    assert len([s for s in shown.splitlines() if " | held " in s]) == len(groups) <= 5
    assert sum(int(row(shown, g)[1].split()[-1]) for g in groups) == len(CLAIMS)  # every claim graded once
    v = formula(committed, "1.0", "1_naive")["max_ulp"]["negative"]["ulp"]
    minus1 = row(shown, MINUS1)
    assert (f"1_naive max ulp: 2^{math.log2(v):.1f}" in minus1[2]) == (v > 2**23.5)
    ties = committed["runs"]["1.5"]["reference"]["ties_corrected"]
    assert row(shown, "the reference")[1] == "held 2 of 2" and 10**7.5 <= ties <= 10**8.5
    # The record changes, the grades follow: the worst error down to 2^23, and a formula failing the task's bar.
    held = int(minus1[1].split()[1])
    formula(changed, "1.0", "1_naive")["max_ulp"]["negative"]["ulp"] = 2.0**23
    formula(changed, "1.5", "F.elu")["tolerance"]["n_fail"] = 7
    shown = cell("predictions", changed)
    assert row(shown, MINUS1)[1] == f"held {held + 1} of 5" and "1_naive max ulp:" not in row(shown, MINUS1)[2]
    assert row(shown, "the task's bar")[1:] == ["held 0 of 1", "finite inputs failing atol = rtol = 1e-4: 7 (none)"]


def test_overview_gives_each_alpha_or_one_value(committed, changed):
    shown = cell("overview", committed)
    one, two = (formula(committed, a, "5_streaming") for a in ("1.0", "1.5"))
    cells = row(shown, "5_streaming")
    assert cells[1] == f"{one['max_ulp']['negative']['ulp']:.4g} / {two['max_ulp']['negative']['ulp']:.4g}"
    assert cells[2] == " / ".join(f"{100 * s['correctly_rounded'] / s['n']:.1f} %" for s in (one, two))
    assert row(shown, "1_naive")[1] == f"{formula(committed, '1.0', '1_naive')['max_ulp']['negative']['ulp']:.3e}"
    formula(changed, "1.5", "1_naive")["max_ulp"]["negative"]["ulp"] *= 0.5
    formula(changed, "1.0", "F.elu")["tolerance"]["n_fail"] = 1
    shown = cell("overview", changed)
    assert row(shown, "1_naive")[1] == "1.678e+07 / 8.389e+06" and row(shown, "F.elu")[4].startswith("FAIL / ")


def test_classes_show_where_formulas_differ(committed, changed):
    shown = cell("classes", committed, alpha="1.0")
    c = formula(committed, "1.0", "1_naive")["classes"]["-normal"]
    want = f"{100 * c['correctly_rounded'] / c['n']:.1f} %; +0.0 for {100 * c['plus_zero_out'] / c['n']:.1f} %"
    assert row(shown, f"-normal ({c['n']} inputs)")[1] == want
    assert "+inf" in shown.splitlines()[0] and "+inf (" not in shown  # alike everywhere: named, not shown
    formula(changed, "1.0", "1_naive")["classes"]["-normal"]["plus_zero_out"] = c["plus_zero_out"] // 2
    assert row(cell("classes", changed, alpha="1.0"), f"-normal ({c['n']} inputs)")[1].endswith(
        f"+0.0 for {100 * (c['plus_zero_out'] // 2) / c['n']:.1f} %")


def test_bounds_against_the_record(committed, changed):
    bn = formula(committed, "1.0", "5_streaming")["binades_negative"]
    worst = max(m / p for m, p in zip(bn["max_ulp"][:255], bn["predicted_max_ulp"][:255]) if p > 0)
    over = [e for e, v in enumerate(bn["max_ulp"][:255]) if v > 1.0]  # expm1f: B = 1 ulp
    cells = row(cell("bounds", committed), "5_streaming")
    assert cells[2].startswith(f"{worst:.3g} / ")
    assert cells[3].startswith(f"{len(over)} (2^{min(over) - 127} to 2^{max(over) - 126}) / ")
    formula(changed, "1.5", "F.elu")["bound"]["n_exceed"] = 12
    assert row(cell("bounds", changed), "F.elu")[1] == "0 / 12"


def test_reference_table(committed, changed):
    r1, r15 = (committed["runs"][a]["reference"] for a in ("1.0", "1.5"))
    shown = cell("reference", committed)
    assert row(shown, f"within {r1['margin_ulp64']} float64 ulps of a float32 midpoint")[1:] == [
        str(r1["near_midpoint"]), str(r15["near_midpoint"])]
    sample = row(shown, "float64 vs decimals on a random sample: inputs / max float64 ulps")
    assert sample[2] == f"{r15['sample_check']['n']} / {r15['sample_check']['max_err_ulp64']:.3g}"
    changed["runs"]["1.5"]["reference"]["near_midpoint"] = r15["near_midpoint"] * 3 // 2
    assert row(cell("reference", changed), f"within {r1['margin_ulp64']} float64 ulps of a float32 midpoint")[2] == str(
        r15["near_midpoint"] * 3 // 2)


def test_binade_figure_draws_the_record(committed, changed):
    import matplotlib

    matplotlib.use("Agg")
    formula(changed, "1.5", "5_streaming")["binades_negative"]["max_ulp"][100] = 64.0
    want = [max(v, figures.ZERO_FLOOR) for v in formula(changed, "1.5", "5_streaming")["binades_negative"]["max_ulp"]]
    lines = {ln.get_label(): ln for ln in figures.binade_figure(changed).axes[1].lines}  # the panel of alpha = 1.5
    assert list(lines["5_streaming"].get_ydata()) == want[1:255] and want[100] == 64.0


def test_committed_record_positive_branch_is_exact(committed):
    """x > 0 returns x: every positive normal input comes back bit for bit, in every formula, and so does
    every positive denormal except under --use_fast_math (which flushes x > 0 itself)."""
    fast_math = {f.name for f in definitions.FORMULAS if f.fast_math}
    for run in committed["runs"].values():
        for name, s in run["formulas"].items():
            c = s["classes"]["+normal"]
            assert c["equal_input"] == c["n"] == 254 * 2**23, name
            d = s["classes"]["+denormal"]
            assert d["equal_input" if name not in fast_math else "plus_zero_out"] == d["n"] == 2**23 - 1, name


# -- on a GPU: the built kernels ----------------------------------------------------------------
@pytest.fixture(scope="module")
def gpu_fns():
    return measure.build_evaluators(definitions.FORMULAS, definitions.SAME_AS)


@needs_gpu
def test_positive_branch_is_exact_in_every_built_formula(gpu_fns):
    g = torch.Generator().manual_seed(0)
    sample = torch.randint(0x00800000, 0x7F800000, (1 << 24,), generator=g).to(torch.int32).view(torch.float32)
    edges = reference.from_bits([0x00800000, 0x7F7FFFFF, 0x7F800000], "cuda")  # least and largest normal, +inf
    normal = torch.cat([sample.cuda(), edges])
    denormal = reference.patterns(1, definitions.BINADE, "cuda")  # every positive denormal
    for name, fn in gpu_fns.items():
        for alpha in definitions.ALPHAS:
            assert torch.equal(reference.bits32(fn(normal, alpha)), reference.bits32(normal)), name
            y = reference.bits32(fn(denormal, alpha))
            flushes = any(f.fast_math for f in definitions.FORMULAS if f.name == name)
            if flushes:  # --use_fast_math: x > 0 is false for a flushed x, so the result is +0.0
                assert bool(((y == reference.bits32(denormal)) | (y == 0)).all()), name
            else:
                assert torch.equal(y, reference.bits32(denormal)), name


@needs_gpu
def test_a_small_range_agrees_with_a_cpu_float64_reference(gpu_fns):
    binade = definitions.BINADE
    ranges = [NEG_DENORMALS, (-(2**31) + 100 * binade, -(2**31) + 101 * binade),  # |x| in [2^-27, 2^-26)
              (-(2**31) + 126 * binade, -(2**31) + 127 * binade)]  # x in (-1, -1/2]
    formulas = [f for f in definitions.FORMULAS if f.name in ("1_naive", "4_fast_math", "5_streaming", "F.elu")]
    body = measure.measure(definitions.ALPHAS, formulas, {}, ranges=ranges, device="cuda", evaluators=gpu_fns,
                           progress=False)
    for alpha in definitions.ALPHAS:
        run = body["runs"][repr(alpha)]
        hist = {f.name: torch.zeros(definitions.N_BINS, dtype=torch.int64) for f in formulas}
        for lo, hi in ranges:
            x = reference.patterns(lo, hi)
            ref_cpu = reference.reference(x, alpha)
            reference.resolve(x, ref_cpu, alpha)
            ref_gpu = reference.reference(x.cuda(), alpha)
            reference.resolve(x.cuda(), ref_gpu, alpha)
            assert torch.equal(reference.bits32(ref_gpu.ref32.cpu()), reference.bits32(ref_cpu.ref32))
            assert ((ref_gpu.ref64.cpu() - ref_cpu.ref64).abs() <= 2 * reference.ulp64(ref_cpu.ref64)).all()
            for f in formulas:
                y = gpu_fns[f.name](x.cuda(), alpha).cpu()
                err = reference.ulp_error(y, ref_cpu.ref64)
                nan_mismatch = torch.isnan(y) ^ torch.isnan(ref_cpu.ref64)
                bins = reference.histogram_bins(err, nan_mismatch)
                hist[f.name] += torch.bincount(bins, minlength=definitions.N_BINS)
        for f in formulas:
            got = torch.tensor(run["formulas"][f.name]["histogram"]["negative"])
            assert (got - hist[f.name]).abs().sum() <= 2, f.name  # a float64 ulp apart can move a bin edge
