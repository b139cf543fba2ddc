import copy
import json

import pytest

from elu_study.core import record as results
from elu_study.core.entries import ENTRIES, study_entries
from elu_study.core.harness import annotate


def fake_record(gpu="NVIDIA H200"):
    def row(name, kind, ms, check=True):
        timing = {"median_ms": ms, "p10_ms": ms * 0.99, "p90_ms": ms * 1.01, "min_ms": ms * 0.98, "runs": 100,
                  "round_medians_ms": [ms, ms * 1.001]}
        chk = {"passed": True, "trials": 3, "unwritten": 0, "max_abs_err_vs_torch": 1e-7,
               "max_abs_err_vs_fp64": 2e-7, "max_rel_err_vs_fp64": 3e-7} if check else None
        return {"name": name, "kind": kind, "what": name, "timing": timing, "check": chk,
                "near_zero_rel_err": None, "sass": None, "extra": {}}

    record = {
        "provenance": {"gpu": gpu, "sm_count": 132, "driver": "1", "cuda_runtime": "13.0", "torch": "2",
                       "nvcc": "13.0", "date_utc": "2026-11-29T00:00:00+00:00"},
        "problem": {"shape": [4096, 393216], "dtype": "float32", "alpha": 1.0, "numel": 1_610_612_736},
        "peak_bytes_per_s": 4.8e12,
        "peak_source": "H200 datasheet",
        "rows": [row("copy_", "baseline", 3.0, check=False), row("1_naive", "step", 6.0)],
    }
    return annotate(record)


def test_annotate_derives_bandwidth_floor_and_roof():
    record = fake_record()
    assert record["floor_ms"] == pytest.approx(2.684, abs=1e-3)
    assert record["roof_ms"] == 3.0
    naive = results.row(record, "1_naive")
    assert naive["x_copy"] == pytest.approx(2.0)
    assert naive["tbps"] == pytest.approx(12.884901888 / 6.0, rel=1e-9)
    assert naive["pct_of_peak"] == pytest.approx(100 * 2.684 / 6.0, rel=1e-3)


def test_save_and_load_round_trip(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    record = fake_record("NVIDIA H100 80GB HBM3")
    path = results.save(record)
    assert path == tmp_path / "nvidia-h100-80gb-hbm3.json"
    assert results.load("NVIDIA H100 80GB HBM3") == json.loads(json.dumps(record))
    with pytest.raises(FileNotFoundError, match="nvidia-h100-80gb-hbm3"):
        results.load("NVIDIA B200")


def test_unknown_row_names_the_rows_there():
    with pytest.raises(KeyError, match="1_naive"):
        results.row(fake_record(), "9_missing")


def test_markdown_table_prints_every_measurement_with_a_decimal_point():
    text = results.markdown(results.frame(fake_record()))
    lines = text.splitlines()
    assert lines[0].split("|")[1].strip() == "entry"
    naive = next(line for line in lines if "1_naive" in line)
    assert "6.000" in naive and "2.000" in naive and "44.7" in naive and "yes" in naive


def test_readme_block_is_replaced_not_appended(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{results.TABLE_BEGIN}\nold\n{results.TABLE_END}\noutro\n")
    results.update_readme(fake_record(), readme=readme)
    results.update_readme(fake_record(), readme=readme)
    text = readme.read_text()
    assert text.startswith("intro\n") and text.endswith("outro\n")
    assert "\nold\n" not in text and text.count("\n| 1_naive ") == 1


def test_recorded_reference_run_is_complete():
    """The committed H200 record holds every entry the study defines, each checked, with provenance."""
    record = results.load(results.REFERENCE_GPU)
    for key in ("gpu", "sm_count", "driver", "cuda_runtime", "torch", "nvcc", "date_utc"):
        assert record["provenance"][key], key
    assert "H200" in record["provenance"]["gpu"]
    names = [r["name"] for r in record["rows"]]
    assert sorted(names) == sorted(e.name for e in study_entries())
    for r in record["rows"]:
        assert r["timing"]["runs"] >= 20 and r["timing"]["p10_ms"] <= r["timing"]["median_ms"] <= r["timing"]["p90_ms"]
        if ENTRIES[r["name"]].checked:
            assert r["check"]["passed"] and r["check"]["unwritten"] == 0, r["name"]
    # Derived columns agree with the raw timings they come from.
    assert annotate(copy.deepcopy(record))["rows"] == record["rows"]


def test_readme_table_is_generated_from_the_record():
    record = results.load(results.REFERENCE_GPU)
    readme = results.README.read_text()
    block = readme.split(results.TABLE_BEGIN)[1].split(results.TABLE_END)[0]
    assert results.markdown(results.frame(record)) in block
    assert results.caption(record) in block
