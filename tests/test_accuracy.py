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

from elu_study.core import record
from elu_study.jobs import accuracy
from elu_study.jobs.accuracy import definitions, figures, measure, reference
from elu_study.jobs.accuracy import notebook as nb

INF = math.inf
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(),
                               reason="needs a CUDA GPU: runs the built kernels on every input of a range")


def f32(*values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32)


def f64(*values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def from_bits(bits: list[int], device="cpu") -> torch.Tensor:
    """float32 values from unsigned 32-bit patterns."""
    return torch.tensor(bits, dtype=torch.int64, device=device).to(torch.int32).view(torch.float32)


def bits(t: torch.Tensor) -> list[int]:
    return [b & 0xFFFFFFFF for b in reference.bits32(t).tolist()]


# -- ulps ---------------------------------------------------------------------------------------
def test_ulp32_is_the_float32_spacing_of_the_binade():
    assert reference.ulp32(f64(1.0, 1.5, -3.0, 2.0**-126, 2.0**-130, 0.0, -0.0)).tolist() == [
        2.0**-23, 2.0**-23, 2.0**-22, 2.0**-149, 2.0**-149, 2.0**-149, 2.0**-149]
    g = torch.Generator().manual_seed(0)
    v = from_bits(torch.randint(0x00800000, 0x7F7FFFFF, (10_000,), generator=g).tolist())  # positive normals
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


# -- classes ------------------------------------------------------------------------------------
def test_classes():
    x = from_bits([0x3F800000, 0xBF800000, 0x00000001, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000,
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
                           device="cpu", evaluators=STANDINS)
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
            assert s["n"] == n == sum(c["n"] for c in s["classes"].values())
            assert s["correctly_rounded"] == sum(c["correctly_rounded"] for c in s["classes"].values())
            assert len(s["binades_negative"]["max_ulp"]) == 256 and s["max_ulp"]["positive"] is None
            assert s["max_ulp"]["negative"]["ulp"] == pytest.approx(max(s["binades_negative"]["max_ulp"]), rel=1e-4)
            assert s["tolerance"]["n_checked"] == n and s["tolerance"]["n_fail"] == 0
        felu = run["formulas"]["F.elu"]
        assert felu["bit_identical_to_felu"] == n and felu["bound"]["n_exceed"] == 0
        naive = run["formulas"]["1_naive"]
        # exp(x) rounds to 1 for every denormal x: every output is +0.0, all of x lost (2^23 ulp at the top).
        assert naive["classes"]["-denormal"]["plus_zero_out"] == n - 1
        assert naive["max_ulp"]["negative"]["ulp"] == pytest.approx(float(alpha) * (2**23 - 1))
    r15 = cpu_record["runs"]["1.5"]["reference"]
    assert r15["exact_ties_tiny_x"] == n // 2 and r15["tie_check"]["disagree"] == 0
    # F.elu rounds alpha * x to even at those ties: right for half of them.
    assert cpu_record["runs"]["1.5"]["formulas"]["F.elu"]["correctly_rounded"] == n - r15["ties_corrected"]


def test_signed_zero_is_not_correctly_rounded(cpu_record):
    s = cpu_record["runs"]["1.0"]["formulas"]["1_naive"]  # exp(-0.0) - 1 = +0.0, where F.elu gives -0.0
    assert s["classes"]["-0.0"] == {"n": 1, "correctly_rounded": 0, "identical_to_felu": 0, "plus_zero_out": 1}
    assert cpu_record["runs"]["1.0"]["formulas"]["F.elu"]["classes"]["-0.0"]["correctly_rounded"] == 1


def test_record_json_is_strict(cpu_record):
    json.loads(record.dumps(cpu_record), parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="without a GPU only")
def test_without_a_gpu_the_job_refuses(capsys):
    with pytest.raises(SystemExit) as stop:
        accuracy.main([])
    assert stop.value.code == 2 and "needs a CUDA GPU" in capsys.readouterr().err


def test_pct_never_rounds_to_all_or_nothing():
    assert nb.pct(5, 5) == "100 %" and nb.pct(0, 5) == "0 %" and nb.pct(1, 3) == "33.3 %"
    assert nb.pct(2**32 - 1, 2**32) == "99.99999998 %" and nb.pct(1, 2**32) == "0.00000002 %"


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


def formula(rec: dict, alpha: str, name: str) -> dict:
    return rec["runs"][alpha]["formulas"][name]


def test_committed_record_counts_every_input_once(committed):
    m = committed["method"]
    assert m["every_input"] and m["n_inputs"] == 2**32
    for alpha in map(repr, m["alphas"]):
        run = committed["runs"][alpha]
        assert list(run["formulas"]) == [f.name for f in definitions.FORMULAS]
        for s in run["formulas"].values():
            assert s["n"] == 2**32
            assert s["tolerance"]["n_checked"] == 2**32 - 2**24  # every finite input
            assert sum(s["classes"][label]["n"] for label in definitions.CLASSES) == 2**32
        assert run["reference"]["unresolved"] == 0


def test_formulas_table_names_each_formula_and_its_copies(committed, changed):
    df = nb.formulas(committed)
    assert list(df.index) == [f["name"] for f in committed["formulas"]]
    assert df.loc["4_fast_math", "documented bound"] == "__expf: 2 + floor(\\|1.173 x\\|) ulp"  # escaped for the table
    assert df.loc["1_naive", "also run by: inputs differing"] == "`2_float4`: 0 / 0, `3_grid_stride`: 0 / 0"
    changed["runs"]["1.5"]["same_as"]["2_float4"]["n_differ"] = 9
    assert nb.formulas(changed).loc["1_naive", "also run by: inputs differing"].startswith("`2_float4`: 0 / 9,")


def test_prediction_is_graded_from_the_record(committed, changed, as_of_this_tree):
    df = nb.prediction(committed)
    v = formula(committed, "1.0", "1_naive")["max_ulp"]["negative"]["ulp"]
    assert df.loc["1_naive", "measured"] == f"2^{math.log2(v):.1f}"
    assert df.loc["1_naive", "grade"] == ("held" if 2**22.5 <= v <= 2**23.5 else "missed")
    formula(changed, "1.0", "1_naive")["max_ulp"]["negative"]["ulp"] = 2.0**23
    formula(changed, "1.0", "5_streaming")["max_ulp"]["negative"]["ulp"] = 1.5
    assert list(nb.prediction(changed)["grade"]) == ["held", "missed"]


def test_overview_gives_each_alpha_or_one_value(committed, changed):
    df = nb.both(committed, nb.summary)
    one, two = (formula(committed, a, "5_streaming") for a in ("1.0", "1.5"))
    assert df.loc["5_streaming", "inputs"] == "2^32"
    assert df.loc["5_streaming", "max ulp, x < 0"] == f"{one['max_ulp']['negative']['ulp']:.4g} / " \
                                                     f"{two['max_ulp']['negative']['ulp']:.4g}"
    assert df.loc["5_streaming", "correctly rounded"] == " / ".join(
        f"{100 * s['correctly_rounded'] / s['n']:.1f} %" for s in (one, two))
    bn = one["binades_negative"]
    worst = max(m / p for m, p in zip(bn["max_ulp"][:255], bn["predicted_max_ulp"][:255]) if p > 0)
    assert df.loc["5_streaming", "worst binade / carried bound"].startswith(f"{worst:.3g} / ")
    formula(changed, "1.5", "1_naive")["max_ulp"]["negative"]["ulp"] = 2.0**22
    formula(changed, "1.0", "F.elu")["tolerance"]["n_fail"] = 1
    formula(changed, "1.5", "F.elu")["bound"]["n_exceed"] = 12
    df = nb.both(changed, nb.summary)
    assert df.loc["1_naive", "max ulp, x < 0"] == "2^24.0 / 2^22.0"
    assert df.loc["F.elu", "task's bar: worst / allowed"].startswith("FAIL / ")
    assert df.loc["F.elu", "inputs above carried bound"] == "0 / 12"


def test_classes_show_each_formula(committed, changed):
    c = formula(committed, "1.0", "1_naive")["classes"]["-normal"]
    label = f"-normal ({c['n']:,})"
    want = f"{100 * c['correctly_rounded'] / c['n']:.1f} %; +0.0 for {100 * c['plus_zero_out'] / c['n']:.1f} %"
    assert nb.classes(committed, "1.0").loc[label, "1_naive"] == want
    formula(changed, "1.0", "1_naive")["classes"]["-normal"]["plus_zero_out"] = c["plus_zero_out"] // 2
    assert nb.classes(changed, "1.0").loc[label, "1_naive"].endswith(
        f"+0.0 for {100 * (c['plus_zero_out'] // 2) / c['n']:.1f} %")


def test_reference_table(committed, changed):
    r15 = committed["runs"]["1.5"]["reference"]
    df = nb.reference(committed)
    assert df.loc["near_midpoint", "alpha = 1.5"] == str(r15["near_midpoint"])
    assert df.loc["sample_check.max_err_ulp64", "alpha = 1.5"] == f"{r15['sample_check']['max_err_ulp64']:.3g}"
    changed["runs"]["1.5"]["reference"]["tie_check"]["disagree"] = 3
    assert nb.reference(changed).loc["tie_check.disagree", "alpha = 1.5"] == "3"


def test_binade_figure_draws_the_record(committed, changed):
    import matplotlib

    matplotlib.use("Agg")
    formula(changed, "1.5", "5_streaming")["binades_negative"]["max_ulp"][100] = 64.0
    want = [max(v, figures.ZERO_FLOOR) for v in formula(changed, "1.5", "5_streaming")["binades_negative"]["max_ulp"]]
    lines = {ln.get_label(): ln for ln in figures.binade_figure(changed).axes[1].lines}  # the panel of alpha = 1.5
    assert list(lines["5_streaming"].get_ydata()) == want[1:255] and want[100] == 64.0


def test_committed_record_positive_branch_is_exact(committed):
    """x > 0 returns x, its correctly rounded ELU: every positive normal input comes back bit for bit, in every
    formula, and so does every positive denormal except under --use_fast_math (which flushes x > 0 itself)."""
    fast_math = {f.name for f in definitions.FORMULAS if f.fast_math}
    for run in committed["runs"].values():
        for name, s in run["formulas"].items():
            c = s["classes"]["+normal"]
            assert c["correctly_rounded"] == c["n"] == 254 * 2**23, name
            d = s["classes"]["+denormal"]
            assert d["correctly_rounded" if name not in fast_math else "plus_zero_out"] == d["n"] == 2**23 - 1, name


# -- on a GPU: the built kernels ----------------------------------------------------------------
@pytest.fixture(scope="module")
def gpu_fns():
    return measure.build_evaluators(definitions.FORMULAS, definitions.SAME_AS)


@needs_gpu
def test_positive_branch_is_exact_in_every_built_formula(gpu_fns):
    g = torch.Generator().manual_seed(0)
    sample = torch.randint(0x00800000, 0x7F800000, (1 << 24,), generator=g).to(torch.int32).view(torch.float32)
    edges = from_bits([0x00800000, 0x7F7FFFFF, 0x7F800000], "cuda")  # least and largest normal, +inf
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
    body = measure.measure(definitions.ALPHAS, formulas, {}, ranges=ranges, device="cuda", evaluators=gpu_fns)
    for alpha in definitions.ALPHAS:
        run = body["runs"][repr(alpha)]
        cr = dict.fromkeys(run["formulas"], 0)
        worst = dict.fromkeys(run["formulas"], 0.0)
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
                same = reference.bits32(y) == reference.bits32(ref_cpu.ref32)
                cr[f.name] += int((same | (torch.isnan(y) & torch.isnan(ref_cpu.ref64))).sum())
                err = reference.ulp_error(y, ref_cpu.ref64)
                worst[f.name] = max(worst[f.name], err.masked_fill(torch.isinf(err), 0.0).max().item())
        for f in formulas:
            s = run["formulas"][f.name]
            assert s["correctly_rounded"] == cr[f.name], f.name
            assert s["max_ulp"]["negative"]["ulp"] == pytest.approx(worst[f.name], rel=1e-9, abs=1e-6), f.name
