"""The size sweep: its plan, and what its views print from the committed record (CPU), and a tiny sweep on a GPU.

Expected numbers are computed here from the record's raw points, not with the job's helpers; each view is also
shown to follow the record: a number changed in memory (a deep copy) changes the printed text."""

import copy
import statistics

import pytest

from elu_study.core import record
from elu_study.core.entries import ENTRIES
from elu_study.jobs import sizes
from elu_study.jobs.sizes import analysis, figures, notebook, plan

GPU_NAME = "NVIDIA H200"


@pytest.fixture(scope="module")
def committed() -> dict:
    return record.load(GPU_NAME, "sizes")


@pytest.fixture
def rec(committed) -> dict:
    return copy.deepcopy(committed)


def raw(rec: dict, entry: str, n: int) -> dict:
    return next(p for p in rec["points"] if p["entry"] == entry and p["n"] == n)


def med(rec: dict, entry: str, n: int, mode: str) -> float:
    """A point's median, µs, read straight from the record."""
    return 1e3 * raw(rec, entry, n)[mode]["median_ms"]


def launch_bound(rec: dict) -> list[int]:
    """The lengths up to the largest at which F.elu's host time is at least its warm GPU time."""
    top = max(n for n in rec["sizes"] if med(rec, "F.elu", n, "host") >= med(rec, "F.elu", n, "warm"))
    return [n for n in rec["sizes"] if n <= top]


def host_median(rec: dict, entry: str) -> float:
    return statistics.median(med(rec, entry, n, "host") for n in launch_bound(rec))


def scale(rec: dict, entry: str, n: int, mode: str, by: float) -> None:
    """Every quantile of one point's timing, times ``by`` (in place)."""
    t = raw(rec, entry, n)[mode]
    for k in ("median_ms", "p10_ms", "p90_ms"):
        t[k] *= by


# -- the plan ------------------------------------------------------------------------------------


def test_plan_holds_every_power_of_two_and_the_non_powers_in_range():
    assert plan.plan(12) == [1024, 2048, 4096]
    assert plan.plan(13) == [1024, 2048, 4096, 4097, 8192]
    lengths = plan.plan()
    assert [n for n in lengths if n & (n - 1) == 0] == [2**k for k in range(10, 32)]
    assert set(lengths) - {2**k for k in range(10, 32)} == {n for n in (*plan.ODD, *plan.DECIMAL) if n <= 2**31}


def test_sweep_entries_take_every_step_and_peer_and_skip_ablations():
    names = [e.name for e in plan.sweep_entries()]
    steps = [e.name for e in ENTRIES.values() if e.kind == "step" and not e.mode]
    assert steps and set(steps) <= set(names)  # a step added to the study is swept without an edit here
    assert set(plan.BASELINE_NAMES) <= set(names) and len(names) == len(set(names))
    assert not any(ENTRIES[n].kind in ("ablation", "attempt") for n in names if n in ENTRIES)
    # the module a model holds and its drop-in, called as a model calls them
    assert [e.name for e in plan.sweep_entries() if e.kind == "module"] == ["nn.ELU", "elu_study.ELU"]
    assert [e.name for e in plan.sweep_entries(["elu_study.ELU", "copy_"])] == ["elu_study.ELU", "copy_"]


def test_fewer_timed_runs_at_large_lengths_within_bounds():
    small, big = plan.runs(2**10), plan.runs(2**31)
    assert plan.MIN_RUNS <= big["cold"] < small["cold"] <= plan.MAX_RUNS
    assert plan.HOST_MIN_CALLS <= big["host_calls"] < small["host_calls"] <= plan.HOST_MAX_CALLS


# -- the record read back ------------------------------------------------------------------------


def test_a_sweep_over_fewer_lengths_writes_a_record_its_own_schema_reads(rec, tmp_path):
    """`--max-exp 13` (the GPU test's tiny sweep) keeps the lengths up to 2^13: its record, derived and saved, loads
    again; the schema still refuses a gain keyed by something other than a length, or that is not a number."""
    kept = [n for n in rec["sizes"] if n <= 2**13]
    part = {k: v for k, v in rec.items() if k not in ("floors", "regimes")}
    part["sizes"], part["points"] = kept, [p for p in rec["points"] if p["n"] in kept]
    fresh = analysis.derive(part)
    assert sorted(map(int, fresh["regimes"]["warm_gain"])) == kept
    record.save(fresh, "sizes", tmp_path)
    assert record.load(GPU_NAME, "sizes", tmp_path)["regimes"]["warm_gain"].keys() == fresh["regimes"]["warm_gain"].keys()
    for key, value in (("2^10", 1.0), (str(kept[0]), "fast")):
        broken = copy.deepcopy(fresh)
        broken["regimes"]["warm_gain"][key] = value
        with pytest.raises(record.RecordError, match="warm_gain"):
            record.load(GPU_NAME, "sizes", record.save(broken, "sizes", tmp_path / key).parent)


def test_derive_recomputes_the_records_derived_numbers(rec):
    fresh = analysis.derive({k: v for k, v in rec.items() if k not in ("floors", "regimes")})
    n = 2**20
    assert fresh["regimes"]["launch_bound_max_n"] == launch_bound(rec)[-1]
    assert fresh["regimes"]["l2_fit_max_n"] == max(n for n in rec["sizes"] if 8 * n <= rec["l2_bytes"])
    gain = med(rec, "F.elu", n, "cold") / med(rec, "F.elu", n, "warm")
    assert fresh["regimes"]["warm_gain"][str(n)] == pytest.approx(gain)
    assert fresh["floors"][str(n)]["stream_cold_ms"] == pytest.approx(
        1e-3 * (med(rec, "read_only", n, "cold") + med(rec, "write_only", n, "cold")))
    # F.elu's host time at the next length made to exceed its warm time: the launch-bound region grows to it
    nxt = min(m for m in rec["sizes"] if m > launch_bound(rec)[-1])
    scale(fresh, "F.elu", nxt, "host", 2 * med(rec, "F.elu", nxt, "warm") / med(rec, "F.elu", nxt, "host"))
    assert analysis.derive(fresh)["regimes"]["launch_bound_max_n"] == nxt


# -- the README block ----------------------------------------------------------------------------


def test_readme_block_quotes_the_record(committed):
    rec, block = committed, notebook.block(committed)
    checked = [p["check"]["passed"] for p in rec["points"] if p["check"]]
    assert f"{sum(checked)} of {len(checked)} element-by-element checks pass" in block
    assert f"on {rec['provenance']['date_utc'][:10]}:" in block and "`results/nvidia-h200-sizes.json`" in block
    assert f"{len(rec['entries'])} entries at {len(rec['sizes'])} lengths" in block
    assert "![nvidia-h200-sizes-time](results/nvidia-h200-sizes-time.png)" in block


def test_readme_block_follows_the_record(rec):
    raw(rec, "2_float4", 4096)["check"]["passed"] = False
    after = notebook.block(rec)
    checked = sum(1 for p in rec["points"] if p["check"])
    assert f"{checked - 1} of {checked} element-by-element checks" in after


# -- notebook 09's cells -------------------------------------------------------------------------


def test_predictions_are_graded_against_the_record(rec):
    lb = launch_bound(rec)[-1]
    fit = max(n for n in rec["sizes"] if 8 * n <= rec["l2_bytes"])
    meet = min(n for n in rec["sizes"] if n > fit and med(rec, "F.elu", n, "cold") < 1.1 * med(rec, "F.elu", n, "warm"))
    preds = [(1, "launch_bound_max_n", (lb, lb)), (1, "launch_bound_max_n", (1, lb // 2)),
             (2, "l2_warm_end_n", (meet, 2 * meet)), (2, "l2_warm_end_n", (2 * meet, 4 * meet))]
    rows = notebook.grade(rec, preds, written="then").splitlines()[2:6]
    assert [r.split(" | ")[-1] for r in rows] == ["HELD |", "MISSED (above) |", "HELD |", "MISSED (below) |"]
    assert f"| {plan.fmt_n(lb)} |" in rows[0] and f"| {plan.fmt_n(meet)} |" in rows[2]
    scale(rec, "F.elu", meet, "cold", 1.5)  # cold no longer within 10 % of warm there: the meeting moves on
    assert f"| {plan.fmt_n(meet)} |" not in notebook.grade(analysis.derive(rec), preds, written="then").splitlines()[4]


def test_entry_table_quotes_the_record_and_follows_it(rec):
    def row(table, entry):
        return next(r for r in table.splitlines() if r.startswith(f"| {entry} |")).split(" | ")

    n0, top = rec["sizes"][0], rec["sizes"][-1]
    main = {"triton": 3.3, "copy_": 3.0}
    cells = row(notebook.entry_table(rec, main), "triton")
    assert cells[1] == f"{host_median(rec, 'triton'):.1f}" and cells[2] == f"{med(rec, 'triton', n0, 'warm'):.2f}"
    assert cells[4:6] == [f"{med(rec, 'triton', top, 'cold') / med(rec, 'copy_', top, 'cold'):.3f}", "1.100 |"]
    # a loop of calls paced by the larger of host and warm time: faster than F.elu's, a tie (apart by no more than
    # the wider half p10-p90 spread of the two paces) or slower, at each launch-bound length
    small = launch_bound(rec)

    def paced(factors: list[float], spread: float = 0.01) -> str:
        """2_float4's cell once its host and warm times are F.elu's times factors[i] at the i-th length, each
        time's p10-p90 spread +-``spread`` of its median, F.elu's too."""
        twin = copy.deepcopy(rec)
        for n, factor in zip(small, factors):
            for mode in ("host", "warm"):
                m = raw(twin, "F.elu", n)[mode]["median_ms"]
                for entry, f in (("F.elu", 1.0), ("2_float4", factor)):
                    raw(twin, entry, n)[mode].update(median_ms=m * f, p10_ms=m * f * (1 - spread),
                                                     p90_ms=m * f * (1 + spread))
        return row(notebook.entry_table(twin, main), "2_float4")[3]

    k = len(small)
    assert paced([0.5] * k) == f"{k} / 0 / 0" and paced([2.0] * k) == f"0 / 0 / {k}"
    assert paced([1.005] * k) == f"0 / {k} / 0"  # inside the spread: a tie, not a loss
    assert paced([0.5, 1.0, 2.0] + [1.0] * (k - 3)) == f"1 / {k - 2} / 1"
    for n in small:
        scale(rec, "triton", n, "host", 1.5)
    assert row(notebook.entry_table(rec, main), "triton")[1] == f"{host_median(rec, 'triton'):.1f}" != cells[1]


def test_a_failed_point_is_shown_and_the_rest_stays_readable(rec):
    bad = raw(rec, "triton", rec["sizes"][0])
    for k in plan.MODES:
        del bad[k]
    bad["error"] = "RuntimeError: boom"
    rec = analysis.derive(rec)
    triton = next(r for r in notebook.entry_table(rec, {}).splitlines() if r.startswith("| triton | "))
    assert triton.split(" | ")[2] == "failed" and rec["regimes"]["launch_bound_max_n"] == launch_bound(rec)[-1]
    counts, failed = triton.split(" | ")[3].split(" (")  # the loop column still adds up: the failed length is named
    assert failed == "1 failed)" and sum(map(int, counts.split(" / "))) == len(launch_bound(rec)) - 1
    assert "**Across sizes.**" in notebook.block(rec)
    import matplotlib.pyplot as plt

    for make in figures.FIGURES.values():  # drawn without the failed point
        plt.close(make(rec))


# -- figures, files and the command line ---------------------------------------------------------


def test_figures_show_l2_launch_region_and_floors(committed):
    import matplotlib.pyplot as plt

    for name, make in figures.FIGURES.items():
        fig = make(committed)
        labels = [t.get_text() for t in fig.legends[0].get_texts()]
        want = "ceiling" if name == "bandwidth" else "floor"  # a time floor is a bandwidth ceiling
        assert "L2 size, 60 MiB" in labels and any(label.startswith("launch-bound") for label in labels)
        assert "read_only + write_only, where no row beats it" in labels
        assert any("datasheet" in s and want in s for s in labels)
        assert {"copy_", "F.elu", "triton", "cub_transform"} <= set(labels) and "read_only" not in labels
        plt.close(fig)


def test_the_streams_sum_is_drawn_only_where_no_row_is_under_it(committed):
    """Each panel's read_only + write_only line: at every length it spans, every timed row's median is at or above
    the sum; at the next shorter length, some row is under it (the line starts as early as it can)."""
    import matplotlib.pyplot as plt

    sizes = sorted(committed["sizes"])
    for name, make in figures.FIGURES.items():
        fig = make(committed)
        for ax, mode in zip(fig.axes, ("cold", "warm")):
            line = next(li for li in ax.get_lines() if li.get_label().startswith("read_only + write_only"))
            shown = [round(x / 8) if name == "bandwidth" else round(x) for x in line.get_xdata()]
            assert shown == [n for n in sizes if n >= shown[0]], name
            assert sizes.index(shown[0]) > 0, "on the committed record the sum bounds no row at the shortest length"
            before = sizes[sizes.index(shown[0]) - 1]
            under = {n: [p["entry"] for p in committed["points"] if p["n"] == n and "cold" in p
                         and p["entry"] not in ("read_only", "write_only") and 1e3 * p[mode]["median_ms"]
                         < med(committed, "read_only", n, mode) + med(committed, "write_only", n, mode)]
                     for n in [before, *shown]}
            assert not any(under[n] for n in shown) and under[before], (name, mode)
        plt.close(fig)


def test_a_row_under_the_streams_sum_moves_where_it_bounds(rec):
    for mode in ("cold", "warm"):
        start = analysis.stream_bound_from(rec, mode)
        sizes = sorted(rec["sizes"])
        assert start is not None and sizes.index(start) + 2 < len(sizes), (mode, start)  # room to move it up twice
        later = sizes[sizes.index(start) + 1]
        scale(rec, "6_beyond_copy", later, mode, 0.5 * rec["floors"][str(later)][f"stream_{mode}_ms"]
              / raw(rec, "6_beyond_copy", later)[mode]["median_ms"])
        assert analysis.stream_bound_from(rec, mode) == sizes[sizes.index(later) + 1]
        scale(rec, "F.elu", sizes[-1], mode, 0.5)  # a row under it at the longest length: it bounds nowhere
        assert analysis.stream_bound_from(rec, mode) is None


def test_write_report_draws_both_figures_and_leaves_the_readme(committed, tmp_path):
    record.save(committed, "sizes", tmp_path)
    paths = sizes.write_report(GPU_NAME, readme=True, results_dir=tmp_path)  # not results/: README.md is left alone
    assert [p.name for p in paths] == ["nvidia-h200-sizes-bandwidth.png", "nvidia-h200-sizes-time.png"]
    assert all(p.stat().st_size > 10_000 for p in paths)
    assert sizes.write_report("no such GPU", results_dir=tmp_path) == []


def test_main_without_gpu_says_so(tmp_path, capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as exit_:
        sizes.main(["--results-dir", str(tmp_path)])
    assert exit_.value.code == 2 and "needs a CUDA GPU" in capsys.readouterr().err


# -- on a GPU ------------------------------------------------------------------------------------

gpu = pytest.mark.skipif("not __import__('torch').cuda.is_available()", reason="needs a CUDA GPU: runs the sweep")


@gpu
def test_tiny_sweep_writes_a_well_formed_record(tmp_path):
    entries = "2_float4,cub_transform,triton,F.elu,torch.compile(F.elu),nn.ELU,elu_study.ELU,copy_,read_only,write_only"
    assert sizes.main(["--max-exp", "13", "--entries", entries, "--results-dir", str(tmp_path),
                       "--no-readme"]) == 0
    import torch

    rec = record.load(torch.cuda.get_device_name(), "sizes", tmp_path)
    assert rec["sizes"] == [1024, 2048, 4096, 4097, 8192]
    assert len(rec["points"]) == 10 * 5 and not rec["errors"]
    for p in rec["points"]:
        assert (p["check"] is None) == (p["entry"] in ("copy_", "read_only", "write_only"))
        if p["check"]:
            assert p["check"]["passed"] and p["check"]["elements_compared"] == p["n"]
        for mode in plan.MODES:
            t = p[mode]
            assert 0 < t["p10_ms"] <= t["median_ms"] <= t["p90_ms"] and t["runs"] >= 3
        assert p["sleep_retries"]["warm"] >= 0 and p["sleep_retries"]["cold"] >= 0
    assert rec["floors"]["8192"]["stream_cold_ms"] > 0
    assert rec["l2_bytes"] > 0 and rec["provenance"]["gpu"] == torch.cuda.get_device_name()
    assert (tmp_path / f"{record.record_path(rec['provenance']['gpu'], 'sizes').stem}-time.png").exists()
