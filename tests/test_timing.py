"""CPU-only tests of timing (elu_study.core.timing), with a fake do_bench, a fake NVML whose readings follow a trace
in real time and fake passes that advance its energy counter; and of what the main job says of the regime it measured."""

from __future__ import annotations

import copy
import sys
import time
import types
from dataclasses import asdict

import pytest

from elu_study.core import derived, record, timing
from elu_study.core.entries import roof_for, study_entries, sustained_entries
from elu_study.jobs.study import report
from elu_study.testing.records import without_sustained

PASS_MS = 2.0  # a fake pass
QUICK = timing.Sustained(settle_min_s=0.3, settle_max_s=1.5, window_s=0.1, timed_s=0.1, chunk_s=0.02)
CAP, BRAKE, IDLE = 4, 0x80, 1


class FakeNvml:
    """A pynvml-like module: SM clock (MHz), power (W) and clock-event reasons as functions of the seconds since it
    was made; an energy counter (mJ) that fake passes advance."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 1
    nvmlClocksEventReasonGpuIdle, nvmlClocksEventReasonSwPowerCap = IDLE, CAP
    nvmlClocksEventReasonHwPowerBrakeSlowdown, nvmlClocksEventReasonAll, nvmlClocksEventReasonNone = BRAKE, 0xFF, 0

    def __init__(self, power=lambda t: 600.0, sm=lambda t: 1980, reasons=lambda t: 0):
        self.t0, self.power, self.sm, self.reasons, self.energy_mj = time.monotonic(), power, sm, reasons, 0

    def now(self) -> float:
        return time.monotonic() - self.t0

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetClockInfo(self, handle, which):
        return self.sm(self.now()) if which == self.NVML_CLOCK_SM else 3201

    def nvmlDeviceGetPowerUsage(self, handle):
        return int(self.power(self.now()) * 1000)  # mW

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return self.reasons(self.now())

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        return self.energy_mj

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return 700_000  # mW

    def run_pass(self, ms: float = PASS_MS):
        """One pass: the energy the board draws at its power now over ``ms`` (W x ms = mJ)."""
        self.energy_mj += self.power(self.now()) * ms


@pytest.fixture
def fake_passes(monkeypatch):
    """timing._event_times without a GPU: n passes of fn, each PASS_MS long, in real time."""
    def event_times(fn, n):
        for _ in range(n):
            fn()
        time.sleep(n * PASS_MS / 1e3)
        return [PASS_MS] * n

    monkeypatch.setattr(timing, "_event_times", event_times)


def _nvml(monkeypatch, fake) -> FakeNvml | None:
    monkeypatch.setitem(sys.modules, "pynvml", fake)  # None: `import pynvml` fails, as without a driver
    return fake


def _samples(power, sm, seconds: float = 0.3, period: float = 0.01, reasons=0) -> list[tuple]:
    """NvmlSampler samples (sm, mem, W, reasons, t) of a trace over ``seconds``."""
    return [(sm(t), 3201, power(t), reasons, t) for t in (i * period for i in range(round(seconds / period) + 1))]


# -- the short protocol's summaries ---------------------------------------------------------------------


def test_summarize_quantiles_rounds_and_noise():
    rounds = [[3.0, 1.0, 2.0], [5.0, 4.0], [6.0, 7.0, 8.0, 9.0, 10.0, 11.0]]  # 1..11 over three rounds
    s = timing.summarize(rounds)
    # linear interpolation over 11 sorted samples: quantile q sits at index 10 q
    assert s["p10_ms"] == pytest.approx(2.0)
    assert s["median_ms"] == pytest.approx(6.0)
    assert s["p90_ms"] == pytest.approx(10.0)
    assert s["runs"] == 11
    assert s["round_medians_ms"] == [2.0, 4.5, 8.5]
    assert s["samples_ms"] == rounds  # kept per round, in order
    assert timing.noise_ms(s) == pytest.approx(8.5 - 2.0)


def test_summarize_rounds_samples_but_not_statistics():
    s = timing.summarize([[0.123456789, 0.2], [0.3], [0.123456789]])
    assert s["samples_ms"] == [[round(0.123456789, timing.SAMPLE_DECIMALS), 0.2], [0.3], [0.12346]]
    assert s["samples_ms"][0][0] == 0.12346
    assert s["round_medians_ms"][2] == s["p10_ms"] == 0.123456789


def test_decode_reasons_names_set_bits():
    nvml = FakeNvml()
    assert timing.decode_reasons(CAP | IDLE, nvml) == ["GpuIdle", "SwPowerCap"]
    assert timing.decode_reasons(CAP, nvml) == ["SwPowerCap"]
    assert timing.decode_reasons(0, nvml) == []
    assert timing.decode_reasons(0xFF, nvml) == ["GpuIdle", "HwPowerBrakeSlowdown", "SwPowerCap"]  # "All" is no reason
    nvml.nvmlClocksThrottleReasonSwPowerCap = CAP
    assert timing.decode_reasons(CAP, nvml) == ["SwPowerCap"]  # old and new names of one bit: once


def test_nvml_sampler_summary():
    sampler = timing.NvmlSampler()
    sampler.samples = []
    assert sampler.summary()["samples"] == 0

    sampler._nvml = FakeNvml()  # decode masks with the fake bits; no NVML call is made
    sampler.samples = [(1980, 3201, 300.0, 0), (1755, 3201, 500.0, 4), (1980, 3201, 400.0, 5), (1980, 3201, 400.0, 0)]
    s = sampler.summary()
    assert s["samples"] == 4
    assert s["sm_clock_mhz"] == {"min": 1755.0, "median": 1980.0, "max": 1980.0}
    assert s["power_w"] == {"mean": 400.0, "max": 500.0}
    assert s["clock_event_reasons"] == {"GpuIdle": 0.25, "SwPowerCap": 0.5}


def test_regime_counts_a_sample_capped_by_the_software_cap_or_the_power_brake_not_by_idling(monkeypatch):
    sampler = timing.NvmlSampler()
    sampler._nvml = FakeNvml()
    masks = (CAP | IDLE, BRAKE, BRAKE, IDLE, 0)  # capped, capped, capped, not, not
    samples = [(1980 - 15 * i, 3201 - 100 * (i % 2), 100.0 * (i + 1), m, i) for i, m in enumerate(masks)]
    assert sampler.regime(samples) == {"sm_clock_mhz": 1950.0, "mem_clock_mhz": 3201.0, "power_w": 300.0,
                                       "capped_fraction": 3 / 5}
    assert sampler.regime([]) == dict.fromkeys(("sm_clock_mhz", "mem_clock_mhz", "power_w", "capped_fraction"))


def _fake_do_bench(nvml: FakeNvml | None, per_pass_mj: dict, calls: int = 12, runs: int = 5):
    """triton.testing.do_bench without a GPU: ``calls`` passes (estimate, warm-up and timed), ``runs`` times back."""
    def do_bench(fn, warmup, rep, return_mode):
        for _ in range(calls):
            name = fn()
            if nvml:
                nvml.energy_mj += per_pass_mj[name]
        time.sleep(0.03)  # long enough for the sampler to read
        return [PASS_MS] * runs

    return types.SimpleNamespace(do_bench=do_bench)


def test_short_protocol_energy_is_each_entrys_counter_over_the_passes_it_ran(monkeypatch):
    nvml = _nvml(monkeypatch, FakeNvml(power=lambda t: 600.0, reasons=lambda t: CAP))
    monkeypatch.setitem(sys.modules, "triton.testing", _fake_do_bench(nvml, {"a": 1000, "b": 3000}))
    out = timing.time_interleaved({"a": lambda: "a", "b": lambda: "b"}, rounds=3)
    # 12 passes a call (do_bench's warm-up too), 5 of them timed: energy over passes, not over timed runs
    assert out["a"]["energy_j"] == pytest.approx(1.0) and out["b"]["energy_j"] == pytest.approx(3.0)
    for t in out.values():
        assert t["runs"] == 15 and len(t["nvml"]) == 3
        assert (t["sm_clock_mhz"], t["power_w"], t["capped_fraction"]) == (1980.0, 600.0, 1.0)


def test_without_nvml_every_nvml_field_is_none(monkeypatch, fake_passes):
    _nvml(monkeypatch, None)
    monkeypatch.setitem(sys.modules, "triton.testing", _fake_do_bench(None, {}))
    short = timing.time_interleaved({"a": lambda: "a"}, rounds=2)["a"]
    assert short["median_ms"] == PASS_MS and short["nvml"] == [{"samples": 0, "error": short["nvml"][0]["error"]}] * 2
    assert "NVML unavailable" in short["nvml"][0]["error"]
    rule = timing.Sustained(settle_min_s=0.05, settle_max_s=0.1, window_s=0.05, timed_s=0.02, chunk_s=0.01)
    sustained = timing.time_sustained(lambda: None, rule)
    assert sustained["median_ms"] == PASS_MS and sustained["runs"] == 10
    assert sustained["settle_s"] >= rule.settle_max_s  # nothing to settle on: the longest wait
    for t in (short, sustained):
        assert {k: t[k] for k in ("sm_clock_mhz", "power_w", "energy_j", "capped_fraction")} == dict.fromkeys(
            ("sm_clock_mhz", "power_w", "energy_j", "capped_fraction"))
    assert sustained["settled"] is None
    assert timing.NvmlSampler().query("nvmlDeviceGetEnforcedPowerLimit", 1e3) is None


def test_query_reads_nvml_and_gives_none_for_what_the_gpu_does_not_report(monkeypatch):
    _nvml(monkeypatch, FakeNvml())
    sampler = timing.NvmlSampler()
    assert sampler.query("nvmlDeviceGetEnforcedPowerLimit", 1e3) == 700.0
    assert sampler.query("nvmlDeviceGetNoSuchReading") is None


# -- the sustained protocol -----------------------------------------------------------------------------------


def test_settle_rule_on_traces():
    flat = _samples(lambda t: 650.0, lambda t: 1500)
    assert timing.settled(flat, QUICK)
    wobble = _samples(lambda t: 650.0 + (10 if int(t * 100) % 2 else -10), lambda t: 1500 + 15 * (int(t * 100) % 2))
    assert timing.settled(wobble, QUICK)  # +-1.5 % power, one clock bin: settled
    assert not timing.settled(_samples(lambda t: 300.0 + 1000 * t, lambda t: 1980), QUICK)  # power ramps 100 W a window
    step = _samples(lambda t: 650.0, lambda t: 1980 if t < 0.22 else 1500)  # the clock drops in the last window
    assert not timing.settled(step, QUICK)
    assert not timing.settled(flat[:15], QUICK)  # 0.14 s: less than two windows
    assert not timing.settled([], QUICK)


def test_sustained_settles_on_a_flat_trace_and_gives_energy_per_timed_pass(monkeypatch, fake_passes):
    # Power ramps for 0.15 s, then holds at 500 W (capped); passes drawn in the ramp cost less than timed ones.
    power = lambda t: min(200.0 + 2000.0 * t, 500.0)
    nvml = _nvml(monkeypatch, FakeNvml(power=power, reasons=lambda t: CAP if power(t) >= 500 else 0))
    out = timing.time_sustained(nvml.run_pass, QUICK)
    assert out["settled"] is True
    assert QUICK.settle_min_s <= out["settle_s"] < QUICK.settle_max_s
    assert out["runs"] == round(QUICK.timed_s * 1e3 / PASS_MS) and out["median_ms"] == PASS_MS
    assert out["energy_j"] == pytest.approx(500.0 * PASS_MS / 1e3)  # W x s: over the timed passes alone
    assert (out["sm_clock_mhz"], out["power_w"], out["capped_fraction"]) == (1980.0, 500.0, 1.0)


def test_sustained_does_not_settle_on_a_ramp_and_stops_at_the_maximum(monkeypatch, fake_passes):
    nvml = _nvml(monkeypatch, FakeNvml(power=lambda t: 200.0 + 1000.0 * t))
    rule = timing.Sustained(**{**asdict(QUICK), "settle_max_s": 0.6})
    out = timing.time_sustained(nvml.run_pass, rule)
    assert out["settled"] is False
    assert rule.settle_max_s <= out["settle_s"] < rule.settle_max_s + 0.2  # a chunk of passes past it, no more
    assert out["capped_fraction"] == 0.0


# -- the main job: which rows, what it says --------------------------------------------------------------------


def test_sustained_rows_cover_the_readme_table_and_each_one_s_roof():
    names = {e.name for e in sustained_entries()}
    shown = {e.name for e in study_entries() if e.kind in ("step", "peer")} | {"F.elu", "torch.compile(F.elu)"}
    assert shown <= names  # the README's table and the regimes figure
    assert not names & {"copy_kernel", "F.elu_", "read_only", "write_only"}  # bounds a short time only
    assert {roof_for(e.direction, e.dtype) for e in sustained_entries()} <= names
    assert {"7_sixteen_bits bfloat16", "7_backward float16", "elu_backward"} <= names
    assert not names & {e.name for e in study_entries() if e.kind == "ablation"}  # the time budget


@pytest.fixture
def steady_record() -> dict:
    """The committed main record with every round at 1980 MHz, no power cap, and sustained fields on two rows."""
    rec = without_sustained(record.load(record.REFERENCE_GPU))  # whichever protocols the committed record holds
    for r in rec["rows"]:
        for s in r["timing"]["nvml"]:
            s["sm_clock_mhz"]["median"], s["clock_event_reasons"] = 1980.0, {}
    rec["method"]["sustained"] = asdict(timing.Sustained())
    rec["provenance"]["power_limit_w"] = 700.0
    for name, settled, capped in (("6_beyond_copy", True, 0.0), ("copy_", False, 0.5)):
        r = record.row(rec, name)
        r["timing"] |= {"sm_clock_mhz": 1980.0, "power_w": 600.0, "energy_j": 1.9, "capped_fraction": 0.0}
        r["timing"]["sustained"] = {"median_ms": 3.1, "p10_ms": 3.0, "p90_ms": 3.2, "runs": 480, "settle_s": 5.0,
                                    "settled": settled, "sm_clock_mhz": 1500.0, "power_w": 699.0, "energy_j": 2.1,
                                    "capped_fraction": capped}
    return rec


def test_summary_says_the_regime_and_warns_when_a_rows_clock_moved_between_rounds(steady_record):
    quiet = " ".join(report.summary(steady_record, live=True).split())  # the lines wrap at 120 columns
    assert "WARNING" not in quiet
    assert "and sustained (2 rows" in quiet and "not settled within 5 s: `copy_`)" in quiet
    assert "power limit 700 W reached by `copy_`." in quiet  # capped under sustained load only

    moved = copy.deepcopy(steady_record)
    clocks = (1980.0, 1980.0, 1500.0, 1560.0, 1980.0)
    for s, mhz in zip(record.row(moved, "2_float4")["timing"]["nvml"], clocks):
        s["sm_clock_mhz"]["median"] = mhz
    for s, mhz in zip(record.row(moved, "F.elu")["timing"]["nvml"], (1980.0, 1890.0, 1980.0, 1980.0, 1980.0)):
        s["sm_clock_mhz"]["median"] = mhz  # 4.8 %: not moved
    record.row(moved, "F.elu")["timing"]["nvml"][0]["clock_event_reasons"] = {"SwPowerCap": 0.2}
    assert report.regime(moved)["moved"] == {"2_float4": (1500.0, 1980.0)}
    text = " ".join(report.summary(moved, live=True).split())
    assert "WARNING: the SM clock moved by more than 5 % between rounds for `2_float4` (1500-1980 MHz)" in text
    assert "reached by `copy_`, `F.elu`." in text

    short = copy.deepcopy(steady_record)
    del short["method"]["sustained"], short["provenance"]["power_limit_w"]
    said = " ".join(report.summary(short, live=True).split())
    assert "interleaved rounds) only; the power limit reached by `copy_`." in said


def test_the_schema_takes_the_new_fields_and_refuses_wrong_types(steady_record):
    body = record.stamped(derived.strip(copy.deepcopy(steady_record)), "study")
    record.check_schema(body, "study", "test")
    r = next(r for r in body["rows"] if r["name"] == "copy_")
    r["timing"]["sustained"] |= {"settled": None, "energy_j": None}  # no NVML
    record.check_schema(body, "study", "test")
    for where, key, bad in ((r["timing"], "energy_j", "1.9 J"), (r["timing"]["sustained"], "settled", "no"),
                            (body["provenance"], "power_limit_w", "700 W")):
        good, where[key] = where[key], bad
        with pytest.raises(record.RecordError, match=key):
            record.check_schema(body, "study", "test")
        where[key] = good
    del r["timing"]["sustained"]["median_ms"]
    with pytest.raises(record.RecordError, match="median_ms"):
        record.check_schema(body, "study", "test")


def test_the_harness_writes_a_record_its_type_accepts(monkeypatch, fake_passes):
    """harness.measure end to end without a GPU (fake NVML at the power cap, fake do_bench and passes; each check
    and SASS report the committed record's): what it returns, saved, is a record the study's type accepts, with the
    short protocol's and the sustained protocol's fields on every row timed both ways. A GPU run must not lose its
    record to a field the code stopped writing."""
    import functools

    import torch

    from elu_study.core import entries, harness

    committed = {r["name"]: r for r in record.load()["rows"]}
    nvml = _nvml(monkeypatch, FakeNvml(power=lambda t: 699.0, sm=lambda t: 1500, reasons=lambda t: CAP))
    names = ("copy_", "F.elu", "2_float4", "6_beyond_copy")
    monkeypatch.setitem(sys.modules, "triton.testing", _fake_do_bench(nvml, dict.fromkeys(names, 2000)))
    monkeypatch.setattr(entries.Entry, "build", lambda self: None)
    monkeypatch.setattr(harness, "input_tensor", lambda shape=None: torch.zeros(16))
    monkeypatch.setattr(harness, "check_entry", lambda e, row, shape, trials: setattr(row, "check",
                                                                                        committed[e.name]["check"]))
    monkeypatch.setattr(harness, "inspect_variant", lambda module: types.SimpleNamespace(
        to_dict=lambda: committed["2_float4"]["sass"]))
    monkeypatch.setattr(harness, "timed_call", lambda e, x, y, cache: lambda: nvml.run_pass() or e.name)
    monkeypatch.setattr(harness, "time_sustained", functools.partial(timing.time_sustained, rule=QUICK))
    monkeypatch.setattr(harness, "provenance", lambda: record.load()["provenance"])
    rec = harness.measure(list(names), rounds=2, sustained=["copy_", "6_beyond_copy"])
    saved = record.stamped(derived.strip(copy.deepcopy(rec)), "study")
    record.check_schema(saved, "study", "harness.measure")
    step6 = next(r for r in rec["rows"] if r["name"] == "6_beyond_copy")
    assert step6["timing"]["capped_fraction"] == 1.0 and step6["timing"]["sustained"]["sm_clock_mhz"] == 1500.0
    assert step6["x_roof_sustained"] is not None and step6["sass"] == committed["2_float4"]["sass"]
