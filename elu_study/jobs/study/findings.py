"""The study's findings (``templates/study/findings/``); a claim the record contradicts is flagged (``claim``)."""

from __future__ import annotations

from elu_study.core import text
from elu_study.core.hardware import bytes_moved
from elu_study.core.record import load, noise, row

NOT_SUPPORTED = "**NOT SUPPORTED by this record:** "
# The sub-1 % comparisons the study makes: (job, entry), each against copy_ in its own run.
CLOSE_CALLS = (("study", "F.elu"), ("study", "torch.compile(F.elu)"), ("study", "2_float4"), ("study", "4_fast_math"),
               ("study", "6_beyond_copy"), ("beyond", "6_beyond_copy"), ("beyond", "6_load_evict_last"))


def claim(holds: bool, statement: str) -> str:
    return statement if holds else NOT_SUPPORTED + statement


def _render(name: str, record: dict, counters: dict | None, holds: bool = True, **numbers) -> str:
    """The finding's template, given every entry's x copy_ (``x``) and counters (``c``, empty without them)."""
    return claim(holds, text.render(f"study/findings/{name}.md.j2", x={r["name"]: r["x_copy"] for r in record["rows"]},
                                    c={r["name"]: r for r in (counters or {}).get("rows", [])}, **numbers))


def _x(record, *names) -> list[float]:
    return [row(record, n)["x_copy"] for n in names]


def roof(record: dict, counters: dict | None = None) -> str:
    pytorch = _x(record, "F.elu", "torch.compile(F.elu)")
    return _render("roof", record, counters, all(abs(x - 1) <= 0.01 for x in pytorch), copy=row(record, "copy_"),
                   peak=record["peak_bytes_per_s"] / 1e12, gb=bytes_moved(record["problem"]["numel"]) / 1e9)


def bytes_in_flight(record: dict, counters: dict | None = None) -> str:
    """Holds where step 1 is far from the roof and step 2 at it (by time), and, with counters, step 2 drives the
    DRAM within 2 points of the copy kernel and step 1 more than 10 under it."""
    naive, float4 = _x(record, "1_naive", "2_float4")
    holds = naive > 1.3 and float4 < 1.02
    if counters:
        dram = {r["name"]: r["dram_pct_of_peak"] for r in counters["rows"]}
        holds = holds and dram["copy_kernel"] - dram["2_float4"] < 2 and dram["copy_kernel"] - dram["1_naive"] > 10
    return _render("bytes_in_flight", record, counters, holds)


def fast_math(record: dict, counters: dict | None = None) -> str:
    float4, fast = _x(record, "2_float4", "4_fast_math")
    return _render("fast_math", record, counters, abs(float4 - fast) < 0.01)


def step5(record: dict, counters: dict | None = None) -> str:
    """Holds where, of step 5's changes from step 2, 128-thread blocks help and 2 vectors and the hints cost."""
    names = ("2+128_threads", "2+2_vectors", "2+4_vectors", "2+hints", "2+expm1f")
    base, *xs = _x(record, "5_as_step_2", *names)
    change = {n: 100 * (x / base - 1) for n, x in zip(names, xs)}
    return _render("step5", record, counters,
                   change["2+128_threads"] < 0 < min(change["2+2_vectors"], change["2+hints"], change["2+expm1f"]))


def accuracy_cost(record: dict, counters: dict | None = None) -> str:
    names = ("2_float4", "2+expm1f", "5_streaming", "5_streaming_expf")
    (f, fe, s5, s5e), z = _x(record, *names), noise(record, *names)
    return _render("accuracy_cost", record, counters, fe > f + 3 * z and abs(s5 - s5e) <= 3 * z,
                   step2=100 * (fe / f - 1))


def tails(record: dict, counters: dict | None = None) -> str:
    ratio = {r["name"]: r["timing"]["p90_ms"] / r["timing"]["median_ms"] for r in record["rows"]}
    nvml = {r["name"]: [s for s in r["timing"].get("nvml", []) if s.get("samples")] for r in record["rows"]}
    return _render("tails", record, counters, ratio=ratio,
                   tailed=sorted((n for n, v in ratio.items() if v >= 1.01), key=lambda n: -ratio[n]),
                   low={n: min(s["sm_clock_mhz"]["min"] for s in ss) for n, ss in nvml.items() if ss},
                   capped=[n for n, ss in sorted(nvml.items()) if any("SwPowerCap" in s.get("clock_event_reasons", {})
                                                                      for s in ss)])


def spread(record: dict, counters: dict | None = None) -> str:
    """Each close call's round-to-round spread, and copy_'s and F.elu's times across every full-shape record."""
    gpu = record["provenance"]["gpu"]
    recs = {"study": record, **{job: load(gpu, job, required=False) for job in ("beyond", "launch", "model")}}
    within = [100 * noise(recs[job], name, "copy_") for job, name in CLOSE_CALLS
              if recs[job] and name in {r["name"] for r in recs[job]["rows"]}]
    runs = [recs[job] for job in ("study", "beyond") if recs[job]]
    across = {"copy_": [row(rec, "copy_")["timing"]["median_ms"] for rec in runs],
              "F.elu": [row(rec, "F.elu")["x_copy"] for rec in runs]}
    beyond, launch, t = recs["beyond"] or {}, recs["launch"], (recs["model"] or {}).get("timings", {})
    across["copy_"] += [p["copy_"]["median_ms"] for p in beyond.get("processes", [])
                        + beyond.get("confirmation", {}).get("processes", [])]
    across["copy_"] += [launch["references"]["copy_"]["timing"]["median_ms"]] if launch else []
    if "copy_" in t:
        across["copy_"].append(t["copy_"]["median_ms"])
        across["F.elu"] += [t["F.elu"]["median_ms"] / t["copy_"]["median_ms"]] if "F.elu" in t else []
    return _render("spread", record, counters, within=within, across=across)


