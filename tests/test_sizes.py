"""The size sweep: its plan, its record, its words and figures (CPU), and a tiny sweep on a GPU."""

import json
import math

import pytest

from elu_study.core import record
from elu_study.core.entries import ENTRIES
from elu_study.jobs import sizes
from elu_study.jobs.sizes import analysis, figures, notebook, plan, readme

GPU_NAME = "NVIDIA H200"
L2 = 60 * 2**20


def _timing(ms: float) -> dict:
    return {"median_ms": ms, "p10_ms": 0.97 * ms, "p90_ms": 1.05 * ms, "p99_ms": 1.1 * ms, "mean_ms": 1.01 * ms,
            "min_ms": 0.95 * ms, "max_ms": 1.2 * ms, "runs": 20}


# A model of the H200: a launch costs 2.5 µs on the GPU; DRAM moves 4.2 TB/s, L2 12 TB/s; host 4-20 µs per call.
HOST_US = {"F.elu": 4.0, "F.elu_": 4.0, "torch.compile(F.elu)": 18.0, "triton": 12.0, "copy_": 3.5,
           "read_only": 5.0, "write_only": 3.0}


def synthetic_record(lengths=None, entries=None, gpu=GPU_NAME) -> dict:
    """A record shaped as sizes.measure writes it, with times from a simple model (no GPU)."""
    lengths = lengths or plan.plan()
    entries = entries or plan.sweep_entries()
    points = []
    for e in entries:
        slow = 1.6 if e.name == "1_naive" else 1.0
        for n in lengths:
            b = plan.BYTES_PER_ELEMENT * n * (0.5 if e.name in plan.STREAMS else 1.0)
            cold = 2.5e-3 + b / 4.2e12 * 1e3 * slow
            warm = 2.5e-3 + b / (12e12 if b <= L2 else 4.3e12) * 1e3 * slow
            if n % 4 and e.kind == "step":
                cold, warm = cold + 2e-3, warm + 2e-3  # the tail's second launch
            host = HOST_US.get(e.name, 6.0) * 1e-3
            p = {"entry": e.name, "kind": e.kind, "n": n, "bytes": plan.BYTES_PER_ELEMENT * n,
                 "check": {"passed": True, "unwritten": 0, "max_abs_err_vs_torch": 1e-7, "elements_compared": n}
                 if e.checked else None,
                 "cold": _timing(cold), "warm": _timing(warm), "host": _timing(host), "host_calls_per_loop": 10,
                 "sleep_retries": {"cold": 0, "warm": 0}, "host_loops_gpu_busy": 5}
            points.append(p)
    made = {
        "job": "sizes",
        "provenance": {"gpu": gpu, "sm_count": 132, "l2_cache_mib": 60.0, "driver": "x", "cuda_runtime": "13.0",
                       "torch": "2.x", "triton": "3.x", "nvcc": "13.0", "python": "3.12",
                       "date_utc": "2026-11-29T00:00:00+00:00", "commit": "abc1234"},
        "problem": {"dtype": "float32", "alpha": 1.0, "bytes_per_element": 8, "input": "randn"},
        "l2_bytes": L2, "peak_bytes_per_s": 4.8e12, "peak_source": "H200 (SXM/NVL) datasheet",
        "sizes": list(lengths),
        "entries": [{"name": e.name, "kind": e.kind, "what": e.what, "checked": e.checked} for e in entries],
        "method": {}, "torch_compile_graphs": 2, "errors": [], "points": points,
    }
    return analysis.derive(json.loads(json.dumps(made)))


def test_plan_holds_every_power_of_two_and_the_non_powers():
    lengths = plan.plan()
    assert lengths == sorted(set(lengths))
    powers = [n for n in lengths if n & (n - 1) == 0]
    assert powers == [2**k for k in range(10, 32)]
    others = [n for n in lengths if n & (n - 1)]
    assert any(n % 2 for n in others), "an odd length"
    assert {10**k for k in range(4, 10)} <= set(others)
    assert all(2**10 <= n <= 2**31 for n in lengths)
    assert plan.plan(12, extra=False) == [1024, 2048, 4096]
    assert plan.plan(13) == [1024, 2048, 4096, 4097, 8192]


def test_sweep_entries_take_every_step_and_peer_and_skip_ablations():
    names = [e.name for e in plan.sweep_entries()]
    steps = [e.name for e in ENTRIES.values() if e.kind == "step" and not e.mode]
    assert steps and set(steps) <= set(names)  # a step added to the study is swept without an edit here
    assert {"triton", "cub_transform", "F.elu", "torch.compile(F.elu)", "F.elu_", "copy_", "read_only",
            "write_only"} <= set(names)
    assert not any(ENTRIES[n].kind in ("ablation", "attempt") for n in names)
    assert len(names) == len(set(names))


def test_runs_and_budget():
    small, big = plan.runs(2**10), plan.runs(2**31)
    assert plan.MIN_RUNS <= big["cold"] <= small["cold"] <= plan.MAX_RUNS
    assert big["host_calls"] >= plan.HOST_MIN_CALLS and small["host_calls"] <= plan.HOST_MAX_CALLS
    # the planned run fits the budget with room for what the model leaves out
    assert plan.estimate_s(plan.plan(), len(plan.sweep_entries())) < 0.75 * plan.BUDGET_S


def test_formats():
    assert plan.fmt_n(2**20) == "2^20" and plan.fmt_n(4097) == "4,097"
    assert plan.fmt_bytes(8 * 2**10) == "8 KiB" and plan.fmt_bytes(60 * 2**20) == "60 MiB"


def test_derived_numbers():
    rec = synthetic_record()
    reg = rec["regimes"]
    # 8 bytes per element: 2^22 elements are 32 MiB (fits 60 MiB), 2^23 are 64 MiB (does not)
    assert reg["l2_fit_max_n"] == max(n for n in rec["sizes"] if 8 * n <= L2)
    assert 2**22 <= reg["l2_fit_max_n"] < 2**23
    # F.elu's host time (4 µs) against warm GPU time 2.5 µs + 8n / 12 TB/s: equal near n = 2^21
    lb = reg["launch_bound_max_n"]
    p = analysis.point(rec, "F.elu", lb)
    assert p["host"]["median_ms"] >= p["warm"]["median_ms"]
    nxt = min(n for n in rec["sizes"] if n > lb)
    q = analysis.point(rec, "F.elu", nxt)
    assert q["host"]["median_ms"] < q["warm"]["median_ms"]
    f = rec["floors"][str(2**31)]
    assert math.isclose(f["datasheet_ms"], 8 * 2**31 / 4.8e12 * 1e3)
    halves = [analysis.point(rec, s, 2**31)["cold"]["median_ms"] for s in plan.STREAMS]
    assert math.isclose(f["stream_cold_ms"], sum(halves))
    p = analysis.point(rec, "copy_", 2**31)
    assert math.isclose(p["cold_tbps"], 8 * 2**31 / (p["cold"]["median_ms"] * 1e-3) / 1e12)


def test_summary_lines_quote_the_record():
    rec = synthetic_record()
    text = "\n".join(readme.summary_lines(rec))
    lb = rec["regimes"]["launch_bound_max_n"]
    assert f"Launch-bound up to {plan.fmt_n(lb)} elements" in text
    # the model makes triton (12 µs) and torch.compile dearer than F.elu (4 µs), the pybind steps (6 µs) too
    host_line = next(line for line in readme.summary_lines(rec) if line.startswith("- **Host cost"))
    assert "`triton` 12.0" in host_line.split("dearer:")[1]
    assert "F.elu 4.0" in host_line
    assert "4,097" in text and "second, scalar launch" in text
    # every custom kernel's host cost is above F.elu's in the model, and the GPU times equal: no length won
    loop = next(line for line in readme.summary_lines(rec) if line.startswith("- **In a loop"))
    assert "`triton` 0" in loop and "`2_float4` 0" in loop
    assert f"{len(rec['points']) - 3 * len(rec['sizes'])} of" in text  # every checked point (3 entries unchecked)
    # an entry that never ran leaves a line that says so instead of a crash
    rec["errors"] = ["triton @ n=1024: RuntimeError: boom"]
    assert "failed to run" in readme.summary_lines(rec)[0]


def test_faster_only_where_the_spreads_do_not_overlap():
    rec = synthetic_record(plan.plan(12))
    ref = analysis.point(rec, "F.elu", 1024)["warm"]
    a, b = analysis.point(rec, "2_float4", 1024)["warm"], analysis.point(rec, "triton", 1024)["warm"]
    a.update(median_ms=0.9 * ref["median_ms"], p10_ms=0.85 * ref["median_ms"], p90_ms=ref["p10_ms"] * 1.001)  # overlaps
    b.update(median_ms=0.8 * ref["median_ms"], p10_ms=0.75 * ref["median_ms"], p90_ms=ref["p10_ms"] * 0.999)  # apart
    assert analysis.classify(rec, "2_float4", 1024, "warm") == "within"
    assert analysis.classify(rec, "triton", 1024, "warm") == "faster"
    line = analysis.versus(rec, ["2_float4", "triton"], 1024, "warm")
    assert line.index("`triton`") < line.index("within the spread") < line.index("`2_float4`")


def test_top_line_lists_every_entry_and_the_main_study():
    rec = synthetic_record()
    main = {"provenance": {"gpu": GPU_NAME, "commit": "abc1234"}, "problem": {"shape": [4096, 393216], "numel": 4096 * 393216},
            "rows": [{"name": "cub_transform", "x_copy": 1.007}, {"name": "F.elu", "x_copy": 1.002}]}
    lines = readme.summary_lines(rec, main=main)
    top = next(line for line in lines if line.startswith("- **At 2^31"))
    for e in rec["entries"]:
        if e["name"] not in plan.STREAMS and e["name"] != "copy_":
            assert f"`{e['name']}` " in top, e["name"]
    assert "main study: 1.007" in top and "1,610,612,736" in top
    assert any("HYPOTHESIS" in line and "cub_transform" in line for line in lines)
    growth = next(line for line in lines if line.startswith("- **Host time grows"))
    assert "HYPOTHESIS" in growth and "`F.elu`" in growth


def test_l2_line_gives_the_largest_gain_past_the_l2_with_its_range():
    rec = synthetic_record()
    gain, fit = rec["regimes"]["warm_gain"], rec["regimes"]["l2_fit_max_n"]
    past = [n for n in rec["sizes"] if 8 * n >= 4 * L2]
    line = readme.l2_lines(rec)[0]
    assert f"{gain[str(fit)]:.2f}x its warm time" in line
    assert f"at most {max(gain[str(n)] for n in past):.3f}x" in line
    assert f"{gain[str(past[0])]:.3f}x at {plan.fmt_n(past[0])}, {gain[str(past[-1])]:.3f}x at {plan.fmt_n(past[-1])}" in line


def test_readme_lines_are_short_and_the_notebook_keeps_every_number():
    rec = synthetic_record()
    short, full = readme.readme_lines(rec), readme.summary_lines(rec)
    assert len(" ".join(short).split()) < len(" ".join(full).split()) / 3
    assert any(line.startswith("- **Host time per call grows:**") and "HYPOTHESIS" in line for line in short)
    for line in short[2:]:
        for sentence in line.split(". "):
            assert len(sentence.split()) <= 40, sentence


def test_check_inputs_prints_assumed_beside_measured(capsys):
    rec = synthetic_record(plan.plan(22))
    notebook.check_inputs(rec, (2, 3), 6, 60)
    out = capsys.readouterr().out
    h = analysis.host_median_us(rec, "F.elu", analysis.small_sizes(rec))
    assert "assumed 2-3 µs" in out and f"measured {h:.1f} µs" in out and "60 MiB" in out


def test_predictions_are_graded_in_one_table():
    rec = synthetic_record()
    lb = rec["regimes"]["launch_bound_max_n"]
    df = notebook.graded(rec, [(1, "launch_bound_max_n", None, (lb, lb)), (1, "launch_bound_max_n", None, (1, lb // 2)),
                               (3, "host_ratio", "triton", (1.5, 8.0)), (4, "x_copy_top", "F.elu", (0.5, 0.9))])
    assert list(df["verdict"]) == ["HELD", "MISSED (above)", "HELD", "MISSED (above)"]
    assert df["measured"].iloc[0] == plan.fmt_n(lb) and df["measured"].iloc[2] == "3.000"  # triton 12 µs / F.elu's 4
    said = notebook.grade(rec, [(1, "launch_bound_max_n", None, (lb, lb))], written="then").data
    assert said.count("Predictions written then") == 1


def test_entry_table_and_findings_quote_the_record():
    rec = synthetic_record()
    df = notebook.entry_table(rec)
    top = plan.fmt_n(rec["sizes"][-1])
    assert set(df.index) == set(analysis.names(rec)) - set(plan.STREAMS)
    assert list(df[f"x copy_, {top}"]) == sorted(df[f"x copy_, {top}"])
    assert df.loc["triton", "host µs"] == pytest.approx(12.0)
    assert df.loc["F.elu", f"loop wins of {len(analysis.small_sizes(rec))}"] == ""  # only custom kernels
    text = notebook.findings(rec).data
    lb = rec["regimes"]["launch_bound_max_n"]
    assert f"Launch-bound up to {plan.fmt_n(lb)} elements" in text and "at most" in text
    assert "costs the host more than F.elu (" in text and "HYPOTHESIS" in text  # the model: 6 µs > 4 µs
    assert all(len(line.split()) <= 45 for line in text.splitlines())


def test_frame_and_failed_points():
    rec = synthetic_record(plan.plan(14))
    bad = analysis.point(rec, "triton", 2**12)
    for k in ("cold", "warm", "host"):
        del bad[k]
    bad["error"] = "RuntimeError: boom"
    rec = analysis.derive(rec)
    df = analysis.frame(rec)
    assert len(df) == len(rec["points"])
    at = lambda entry, n: df[(df.index == entry) & (df["n"] == n)].iloc[0]  # noqa: E731
    assert at("triton", "2^12")["error"] == "RuntimeError: boom"
    assert at("F.elu", "2^12")["correct"] == "yes" and at("copy_", "2^12")["correct"] == "n/a"
    assert at("F.elu", "2^12")["cold µs"] == pytest.approx(1e3 * analysis.point(rec, "F.elu", 2**12)["cold"]["median_ms"])
    n, _ = analysis.series(rec, "triton", "cold")
    assert 2**12 not in n and n.size == len(rec["sizes"]) - 1
    assert any("`triton`" in line for line in readme.summary_lines(rec))  # a failed point leaves the rest readable


def test_figures_show_l2_launch_region_and_floors():
    import matplotlib

    matplotlib.use("Agg")
    rec = synthetic_record()
    figs = figures.figures(rec)
    assert set(figs) == {"bandwidth", "time"}
    for name, fig in figs.items():
        labels = [t.get_text() for t in fig.legends[0].get_texts()]
        assert any(lbl.startswith("L2 60 MiB") for lbl in labels), (name, labels)
        assert any(lbl.startswith("launch-bound") for lbl in labels)
        # a time floor is a bandwidth ceiling: each figure names it for its own axis
        want = "measured ceiling" if name == "bandwidth" else "measured floor"
        assert any(lbl.startswith(f"{want}: read_only + write_only") for lbl in labels), (name, labels)
        assert any("datasheet" in lbl and ("ceiling" if name == "bandwidth" else "floor") in lbl for lbl in labels)
        assert "copy_" in labels and "F.elu" in labels and "triton" in labels and "cub_transform" in labels
        assert "read_only" not in labels  # shown through the measured floor
        logs = fig.axes[:2] if name == "bandwidth" else fig.axes
        for ax in logs:
            assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    linear = figs["bandwidth"].axes[2]  # x copy_ at large sizes, linear so that a few per cent show
    assert linear.get_yscale() == "linear" and "x copy_" in linear.get_title()
    assert "1_naive" in linear.get_title()  # the model's 1.6x entry is named, off the chart
    import matplotlib.pyplot as plt

    plt.close("all")


def test_write_figures_record_and_readme_block(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    rec = synthetic_record(plan.plan(16))
    path = record.save(rec, "sizes", tmp_path)
    assert path.name == "nvidia-h200-sizes.json"
    assert record.load("NVIDIA H200", "sizes", tmp_path)["points"] == rec["points"]
    paths = sizes.write_report("NVIDIA H200", readme=True, results_dir=tmp_path)  # not results/: the README is left alone
    assert [p.name for p in paths] == ["nvidia-h200-sizes-bandwidth.png", "nvidia-h200-sizes-time.png"]
    assert all(p.stat().st_size > 10_000 for p in paths)
    readme_md = tmp_path / "README.md"
    begin, end = record.block_markers("sizes")
    readme_md.write_text(f"head\n{begin}\nOLD BLOCK\n{end}\ntail\n")
    record.write_block("sizes", readme.block(rec, paths, readme_md), readme_md)
    text = readme_md.read_text()
    assert text.startswith("head\n") and text.endswith(f"{end}\ntail\n") and "OLD BLOCK" not in text
    assert "**Across sizes.**" in text and "**The L2**" in text and "nvidia-h200-sizes-time.png" in text
    assert "(notebooks/09_sizes.ipynb)" in text  # the detail is the notebook's
    drawn = [record.figure_path(GPU_NAME, f"sizes-{name}") for name in ("bandwidth", "time")]
    assert readme.block(rec) == readme.block(rec, drawn)  # without figures, it links where write_figures saves them
    readme_md.write_text("no markers\n")
    with pytest.raises(ValueError, match="sizes:begin"):
        record.write_block("sizes", readme.block(rec, paths, readme_md), readme_md)


def test_main_without_gpu_prints_the_record(tmp_path, capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert sizes.main(["--results-dir", str(tmp_path)]) == 2
    assert "no recorded sweep" in capsys.readouterr().err
    record.save(synthetic_record(), "sizes", tmp_path)
    assert sizes.main(["--results-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "NO GPU HERE" in out and "Launch-bound up to" in out and "2^31" in out


def test_job_is_registered():
    from elu_study.__main__ import JOBS

    assert JOBS["sizes"] == "elu_study.jobs.sizes"


# -- on a GPU ------------------------------------------------------------------------------------

gpu = pytest.mark.skipif("not __import__('torch').cuda.is_available()", reason="needs a CUDA GPU: runs the sweep")


@gpu
def test_tiny_sweep_writes_a_well_formed_record(tmp_path):
    entries = "2_float4,cub_transform,triton,F.elu,torch.compile(F.elu),copy_,read_only,write_only"
    assert sizes.main(["--max-exp", "13", "--entries", entries, "--results-dir", str(tmp_path), "--no-readme"]) == 0
    import torch

    rec = record.load(torch.cuda.get_device_name(), "sizes", tmp_path)
    assert rec["sizes"] == [1024, 2048, 4096, 4097, 8192]
    assert len(rec["points"]) == 8 * 5 and not rec["errors"]
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


def test_like_for_like_host_cost_comes_from_the_model_record():
    rec = synthetic_record()
    model = record.load(rec["provenance"]["gpu"], "model", required=False)
    lines = notebook.model_host_line(rec, "F.elu")
    assert notebook.model_host_line(rec, "copy_") == []
    if model is None:
        assert lines == []
        return
    med = {r: sorted(v["us_per_call"] for v in model["host_cost"] if v["route"] == r and not v["requires_grad"]
                     and not v["autocast"]) for r in notebook.MODEL_ROUTES}
    mid = {r: (v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2) for r, v in med.items()}
    assert f"{mid['binding']:.2f} µs" in lines[0] and f"{mid['binding'] / mid['F.elu']:.2f}x" in lines[0]
    assert "not like for like" in notebook.findings(rec).data
