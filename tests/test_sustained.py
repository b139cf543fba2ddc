"""Issue 46's presentation of the sustained protocol, on the committed step-6 record with sustained timings added as a
GPU run would write them: the derived ratio and the graded prediction."""

from __future__ import annotations

import copy

import pytest

from elu_study.core import derived, fingerprint, record, tables
from elu_study.core.entries import ENTRIES
from elu_study.jobs.beyond import analysis
from elu_study.testing.records import without_sustained


def sustained(ms: float, mhz: float = 1500.0, joules: float | None = 2.0, capped: float = 1.0) -> dict:
    return {"median_ms": ms, "p10_ms": ms, "p90_ms": ms, "runs": 400, "settle_s": 3.0, "settled": True,
            "sm_clock_mhz": mhz, "power_w": 699.0, "energy_j": joules, "capped_fraction": capped}


EARLIER_VARIANTS = fingerprint.earlier_variants  # the real one (as_of_this_tree stands in for it)
pytestmark = pytest.mark.usefixtures("as_of_this_tree")  # grades without the "(earlier build)" label (tested apart)


@pytest.fixture()
def beyond():
    rec = without_sustained(record.load(job="beyond"))  # whichever protocols the committed record holds
    times = {"copy_": 3.000, "6_base": 3.006, "6_256_threads": 3.000, "6_load_evict_last": 2.940,
             "6_evict_last_expm1poly": 2.985, "6_beyond_copy": 2.985, "6_expm1f": 3.150}
    for name, ms in times.items():
        record.row(rec, name)["timing"]["sustained"] = sustained(ms, joules=1.9 if name == "6_beyond_copy" else 2.0)
    return derived.annotate(rec)


def test_the_sustained_ratio_is_derived_from_both_sustained_medians_and_only_where_both_exist(beyond):
    assert record.row(beyond, "6_load_evict_last")["x_roof_sustained"] == pytest.approx(2.940 / 3.000)
    assert record.row(beyond, "2_float4")["x_roof_sustained"] is None  # not timed so: no ratio, not a guess
    saved = derived.strip(beyond)
    assert all("x_roof_sustained" not in r for r in saved["rows"])  # derived, never stored


def test_the_prediction_is_graded_on_each_rows_sustained_ratio_and_the_defaults_energy(beyond):
    graded = tables.sustained_graded(beyond, analysis.SUSTAINED_PREDICTION)
    time, energy = "{}, time over copy_'s", "{}, J per pass over copy_'s"
    assert graded.loc[time.format("6_load_evict_last"), "measured"] == pytest.approx(0.98)
    assert graded.loc[time.format("6_load_evict_last"), "grade"] == "HELD"
    assert graded.loc[time.format("6_base"), "grade"] == "HELD"
    assert graded.loc[time.format("6_expm1f"), "grade"] == "HELD"  # 1.05
    assert graded.loc[energy.format("6_beyond_copy"), "measured"] == pytest.approx(0.95)
    slower = copy.deepcopy(beyond)
    record.row(slower, "6_load_evict_last")["timing"]["sustained"]["median_ms"] = 3.0
    graded = tables.sustained_graded(derived.annotate(slower), analysis.SUSTAINED_PREDICTION)
    assert graded.loc[time.format("6_load_evict_last"), "grade"] == "MISSED (higher)"  # 1.0 over 0.99
    tied = tables.sustained_graded(derived.annotate(slower), analysis.SUSTAINED_PREDICTION, ties=(0.011, 0.0))
    assert tied.loc[time.format("6_load_evict_last"), "grade"] == "TIE (within the runs' spread)"
    assert tables.sustained_graded(derived.annotate(slower), analysis.SUSTAINED_PREDICTION, ties=(0.009, 0.0)).loc[
        time.format("6_load_evict_last"), "grade"] == "MISSED (higher)"
    record.row(slower, "copy_")["timing"]["sustained"]["energy_j"] = None  # NVML gave no energy reading
    graded = tables.sustained_graded(derived.annotate(slower), analysis.SUSTAINED_PREDICTION)
    assert graded.loc[energy.format("6_beyond_copy"), "grade"] == "no reading"
    assert tables.sustained_graded(without_sustained(beyond), analysis.SUSTAINED_PREDICTION) is None  # short only


def test_a_prediction_with_several_runs_of_its_build_holds_only_where_every_run_holds(beyond, monkeypatch):
    """Other sustained runs of a row's build (another record's, or the same build under another name) are graded too:
    runs graded apart put the range's edge within the protocol's resolution, a tie, whichever run the table shows."""
    time, energy = "{}, time over copy_'s", "{}, J per pass over copy_'s"
    other = copy.deepcopy(beyond)
    record.row(other, "6_load_evict_last")["timing"]["sustained"]["median_ms"] = 2.95  # 0.983: inside 0.975-0.99
    other = derived.annotate(other)
    also = {"6_load_evict_last": [(other, "6_load_evict_last")]}
    graded = tables.sustained_graded(beyond, analysis.SUSTAINED_PREDICTION, also=also)
    assert graded.loc[time.format("6_load_evict_last"), "grade"] == "HELD"  # 0.980 and 0.983: both inside
    assert graded.loc[time.format("6_load_evict_last"), "other runs"] == "0.983"
    record.row(other, "6_load_evict_last")["timing"]["sustained"]["median_ms"] = 3.0  # 1.000: over 0.99
    also = {"6_load_evict_last": [(derived.annotate(other), "6_load_evict_last")]}
    graded = tables.sustained_graded(beyond, analysis.SUSTAINED_PREDICTION, ties=(0.02, 0.0), also=also)
    assert graded.loc[time.format("6_load_evict_last"), "grade"] == "TIE (its runs graded apart)"  # 0.01 out < 0.02
    assert graded.loc[time.format("6_load_evict_last"), "measured"] == pytest.approx(0.98)  # the record's own run
    far = tables.sustained_graded(beyond, analysis.SUSTAINED_PREDICTION, ties=(0.005, 0.0), also=also)
    assert far.loc[time.format("6_load_evict_last"), "grade"] == "MISSED (higher)"  # one run past the tie: its miss
    monkeypatch.setattr(fingerprint, "earlier_variants", lambda rec: {"6_beyond_copy"} if rec is also[
        "6_load_evict_last"][0][0] else set())  # the other run is an earlier build's: another kernel, not counted
    alone = tables.sustained_graded(beyond, analysis.SUSTAINED_PREDICTION, ties=(0.005, 0.0), also=also)
    assert alone.loc[time.format("6_load_evict_last"), ["grade", "other runs"]].tolist() == ["HELD", ""]
    monkeypatch.undo()
    assert graded.loc[time.format("6_base"), "grade"] == "HELD"  # no other run: graded as before
    assert graded.loc[energy.format("6_beyond_copy"), "grade"] == "HELD"
    assert graded.loc[time.format("6_base"), "other runs"] == ""  # none: an empty cell
    assert "other runs" not in tables.sustained_graded(beyond, analysis.SUSTAINED_PREDICTION)  # none given


def test_step_7s_prediction_is_graded_per_dtype_against_its_own_copy():
    from elu_study.jobs.sixteen import analysis as sixteen

    rec = without_sustained(record.load(job="sixteen"))
    for dtype, (roof, table, exact) in {"bfloat16": (1.5, 1.53, 2.4), "float16": (1.5, 1.47, 3.15)}.items():
        for name, ms in ((f"copy_ {dtype}", roof), (f"7_sixteen_bits {dtype}", table), (f"7_exact {dtype}", exact)):
            record.row(rec, name)["timing"]["sustained"] = sustained(ms)
    graded = tables.sustained_graded(derived.annotate(rec), sixteen.SUSTAINED_PREDICTION)["grade"].to_dict()
    expected = {"7_sixteen_bits bfloat16, time over copy_ bfloat16's": "HELD",  # 1.02
                "7_exact bfloat16, time over copy_ bfloat16's": "HELD",  # 1.6
                "7_sixteen_bits float16, time over copy_ float16's": "MISSED (lower)",  # 0.98: kept its gain
                "7_exact float16, time over copy_ float16's": "MISSED (higher)"}  # 2.1
    assert {k: graded[k] for k in expected} == expected
    rec["rows"] = [r for r in rec["rows"] if r["name"] != "7_exact float16"]  # as if added after the run
    graded = tables.sustained_graded(derived.annotate(rec), sixteen.SUSTAINED_PREDICTION)
    assert graded.loc["7_exact float16, time over copy_ float16's", "grade"] == "not measured yet"
    assert graded.loc["7_exact float16, time over copy_ float16's", "range"] == "1.500-2.000"
    assert tables.sustained_graded(without_sustained(rec), sixteen.SUSTAINED_PREDICTION) is None  # nothing graded


def test_a_roof_is_timed_under_sustained_load_only_where_a_row_is_taken_over_it():
    """Each sustained row's roof runs sustained too, and no roof that no sustained row needs: step 7's batches leave
    float32's copy_ out (no float32 row of theirs is timed so), step 6's leaves bfloat16's out."""
    from elu_study.core.entries import ATTEMPTS, ENTRIES, resolve, roof_for, sustained_entries
    from elu_study.jobs.beyond import measure as beyond
    from elu_study.jobs.sixteen import measure as sixteen

    step6 = beyond.sustained([ENTRIES[n] for n in beyond.COMPARED] + list(ATTEMPTS))
    step7 = {d: sixteen.sustained_rows(resolve(sixteen.timed_names(d))) for d in ("bfloat16", "float16")}
    for rows in (sustained_entries(), step6, *step7.values()):
        assert {roof_for(e.direction, e.dtype) for e in rows} <= {e.name for e in rows}
    assert "copy_" not in {e.name for e in step7["float16"]}
    # step 7's: what its sustained prediction grades (and any marked row), and their roofs; no other row
    for d, rows in step7.items():
        graded = {n for k in sixteen.SUSTAINED_PREDICTION if (n := k.removesuffix(" J")).endswith(f" {d}")}
        graded |= {e.name for e in resolve(sixteen.timed_names(d)) if e.sustained}
        roofs = {roof_for(ENTRIES[n].direction, d) for n in graded}
        assert {e.name for e in rows} == graded | roofs, d
    assert "copy_ bfloat16" not in {e.name for e in step6}
    # step 6's: the marked attempts, its default and copy_; the rows it is compared with are the main record's
    assert {e.name for e in step6} == {e.name for e in ATTEMPTS if e.sustained} | {"copy_", "6_beyond_copy"}


def test_the_protocols_resolution_is_how_far_sustained_runs_of_one_build_fall_apart(beyond):
    """Step 6's build under two names (and the main record's run of it): the spread of their sustained ratios and
    of their energies over copy_'s; one run has no spread."""
    twice = copy.deepcopy(beyond)
    record.row(twice, "6_evict_last_expm1poly")["timing"]["sustained"] = sustained(2.97, joules=2.1)
    twice = derived.annotate(twice)
    time, energy = tables.runs_spread([(twice, "6_beyond_copy"), (twice, "6_evict_last_expm1poly")])
    assert time == pytest.approx(record.row(twice, "6_beyond_copy")["x_roof_sustained"] - 2.97 / 3.0)
    assert energy == pytest.approx((2.1 - 1.9) / 2.0)
    assert tables.runs_spread([(twice, "6_beyond_copy")]) == (0.0, 0.0)


def test_a_grade_of_a_row_whose_kernel_build_changed_says_so(beyond, monkeypatch):
    """A row built from a kernel file whose build changed since the record (``fingerprint.earlier_variants``) keeps
    its grade, labelled "(earlier build)"; the rows of other kernel files are graded as before."""
    monkeypatch.setattr(fingerprint, "earlier_variants", lambda rec: {"6_beyond_copy"})
    graded = tables.sustained_graded(beyond, analysis.SUSTAINED_PREDICTION)["grade"]
    assert ENTRIES["6_load_evict_last"].variant == "6_beyond_copy" and ENTRIES["2_float4"].variant == "2_float4"
    assert graded["6_load_evict_last, time over copy_'s"] == "HELD (earlier build)"
    assert graded["6_base, time over copy_'s"] == "HELD (earlier build)"
    monkeypatch.setattr(fingerprint, "earlier_variants", lambda rec: {"2_float4"})
    assert tables.sustained_graded(beyond, analysis.SUSTAINED_PREDICTION)["grade"][
        "6_load_evict_last, time over copy_'s"] == "HELD"


def test_the_kernel_files_of_a_changed_build_are_the_earlier_ones(monkeypatch):
    """``earlier_variants``: the kernel files whose build no longer matches the digest the record holds."""
    monkeypatch.setattr(fingerprint, "earlier_variants", EARLIER_VARIANTS)  # the real one
    rec = copy.deepcopy(record.load(job="beyond"))
    builds = rec["fingerprint"]["builds"]
    for key in builds:  # as if measured from this tree
        builds[key] = fingerprint.build_digest(*fingerprint.parse_build_key(key))
    assert fingerprint.earlier_variants(rec) == set()
    builds[next(k for k in builds if k.startswith("5_streaming"))] = "an earlier digest"
    assert fingerprint.earlier_variants(rec) == {"5_streaming"}
    assert any(ENTRIES[r["name"]].variant == "5_streaming" for r in rec["rows"] if r["name"] in ENTRIES)
