"""What step 7's record says (no GPU), one table each: what each one-change build did, the instruction budget, the
exhaustive checks, the record's resolution, the prediction and the goals graded."""

import pandas as pd

from elu_study.core import fingerprint
from elu_study.core.entries import ENTRIES, roof_of
from elu_study.core.hardware import issue_bound
from elu_study.core.ncu import SCHEDULERS, counter_rows, issue_pct
from elu_study.core.record import row
from elu_study.core.tables import as_built
from elu_study.core.timing import noise_ms

DTYPES = ("bfloat16", "float16")
LANES = 32  # threads per warp instruction
DEFAULT = "7_sixteen_bits"
# Notebook 12's one prediction, written before the table's first recorded run: (entry, what) -> range.
PREDICTION = {(f"{DEFAULT} {d}", what): r for d, most in (("bfloat16", 1.04), ("float16", 1.05))
              for what, r in (("x own copy_", (1.00, most)), ("inst/elem", (11, 18)), ("mismatches", (0, 0)))}
SHOWN = {"x own copy_": "{:.3f}", "inst/elem": "{:.3f}", "mismatches": "{:,}"}
# Issue 24's goals over the row's own roof (the dtype's copy_, torch.add for the backward): (aim, must).
GOALS = {f"{DEFAULT} bfloat16": (1.00, 1.00), f"{DEFAULT} float16": (1.00, 1.01),
         **{f"7_backward {d}": (0.98, 0.99) for d in DTYPES}}
# Two rows of one kernel each (Poly is Lean on bfloat16, Mid on float16): their gap is the record's resolution.
SAME_KERNEL = (("7_lean bfloat16", "7_poly bfloat16"), ("7_mid float16", "7_poly float16"))
FORMATS = {"difference": "{:+.3f}", "inst/elem": "{:.3f}", "SM MHz": "{:.0f}", "used %": "{:.0f}", "issue %": "{:.0f}",
           "DRAM %": "{:.1f}", "budget inst/elem": "{:.1f}", "grads": "{:.0f}"}  # other floats: 3 decimals


# Issue 46's prediction for step 7 under sustained load, written on 2026-12-05 before the run (notebook 12): the
# table's gain is paid in instructions (its fill, a shared-memory load and a clamp per element), so it shrinks when
# the SM clock falls at the power limit; 7_exact, issue-bound already, slows with the clock (``tables.sustained_graded``).
SUSTAINED_PREDICTION = {**{f"{name} {dtype}": bounds for dtype in DTYPES
                           for name, bounds in (("7_sixteen_bits", (1.0, 1.06)), ("7_exact", (1.5, 2.0)))},
                        # Added later that day, before its first run: the earlier float16 default, its table read
                        # only where used (ELU7_LOOKUP=0), times as that default did under sustained load.
                        "7_predicated_lookup float16": (1.04, 1.09),
                        # And float16's earlier backward, expf behind a branch per element (ELU7_BWD_SELECT=0): as
                        # that backward ran in both records, 0.99 to 1.02x torch.add's time; the new one, expf on
                        # every lane, under it: 0.97 to 1.00x.
                        "7_backward_branch float16": (0.99, 1.02), "7_backward float16": (0.97, 1.00)}


def rows_of(record: dict, dtype: str) -> list[dict]:
    return [r for r in record["rows"] if r.get("mode") == dtype]


def ms(record: dict, name: str) -> float:
    return row(record, name)["timing"]["median_ms"]


def counter(record: dict, name: str, key: str = "thread_instructions_per_element") -> float | None:
    return counter_rows(record).get(name, {}).get(key)


def x_own_copy(record: dict, name: str) -> tuple[float, float, float]:
    """(median, p10, p90) of a row's time over its own roof's median: its dtype's copy_ (torch.add for backward)."""
    t, roof = row(record, name)["timing"], ms(record, roof_of(name, row(record, name)["mode"]))
    return t["median_ms"] / roof, t["p10_ms"] / roof, t["p90_ms"] / roof


def checks_of(record: dict) -> dict:
    """Every exhaustive check of the record, forward and backward, by entry name."""
    return {**record["exhaustive"], **record["exhaustive_backward"]}


def exact(check: dict) -> bool:
    return not (check["mismatches"] or check["untouched"])


def spread(record: dict, name: str) -> float:
    """A row's run-to-run noise over its own roof: the spread of its round medians (``timing.noise_ms``)."""
    return noise_ms(row(record, name)["timing"]) / ms(record, roof_of(name, row(record, name)["mode"]))


def half_band(record: dict, name: str) -> float:
    """Half a row's p10-p90 over its own roof's median: how far apart its single calls fall."""
    _, p10, p90 = x_own_copy(record, name)
    return (p90 - p10) / 2


def tried_frame(record: dict) -> pd.DataFrame:
    """Each one-change row against its base: a tie within the widest of the record's resolution and either row's
    spread or half p10-p90 ("tie within")."""
    checks, res, out = checks_of(record), resolution_frame(record)["gap"].max(), []
    for r in (r for r in record["rows"] if r.get("base") in checks and r["name"] in checks):
        x, xb, c = x_own_copy(record, r["name"])[0], x_own_copy(record, r["base"])[0], checks[r["name"]]
        tie = max(res, *(f(record, n) for f in (spread, half_band) for n in (r["name"], r["base"])))
        out.append({"entry": r["name"], "change": r["what"], "base": r["base"], "x own roof": x,
                    "difference": x - xb, "tie within": tie,
                    "verdict": "tie" if abs(x - xb) < tie else "faster" if x < xb else "slower",
                    "bit-exact": "yes" if exact(c) else f"NO ({c['mismatches']:,})"})
    return pd.DataFrame(out).set_index("entry")


def resolution_frame(record: dict) -> pd.DataFrame:
    """Each SAME_KERNEL pair: same opcodes or not, both times over own copy_, their gap (a narrower difference is a
    tie), and of the timing rounds in which the two ran at different SM clocks (NVML's round medians), in how many
    the faster row had the higher clock."""
    out = []
    for a, b in SAME_KERNEL:
        (ta, tb), (xa, xb) = (row(record, n)["timing"] for n in (a, b)), (x_own_copy(record, n)[0] for n in (a, b))
        clocks = [(na["sm_clock_mhz"]["median"], nb["sm_clock_mhz"]["median"]) for na, nb in zip(ta["nvml"], tb["nvml"])]
        apart = [(ma < mb) == (ca > cb) for ma, mb, (ca, cb) in zip(ta["round_medians_ms"], tb["round_medians_ms"], clocks)
                 if ca != cb]  # equal clocks tell nothing
        same = record["sass16"][a].get("opcodes") == record["sass16"][b].get("opcodes")
        out.append({"first / second": f"{a} / {b}", "same opcodes (sass16)": "yes" if same else "NO", "first": xa,
                    "second": xb, "gap": abs(xa - xb),
                    "faster at the higher clock": f"{sum(apart)} of {len(apart)} rounds with different clocks"})
    return pd.DataFrame(out).set_index("first / second")


def exhaustive_frame(record: dict) -> pd.DataFrame:
    """Every check on every bit pattern at every alpha: the builds meant to be exact in one line per direction (the
    backward's with its grads), each ablation or peer in its own."""
    out = [{"checked": f"exact by design, {'backward' if 'grads' in c else 'forward'}" if c["expect_exact"] else n,
            "inputs": c["inputs"], "alphas": c["alphas"], "grads": c.get("grads"), "bit-identical": exact(c),
            "mismatches": c["mismatches"], "required": c["required_mismatches"], "any": c["alphas_with_mismatches"]}
           for n, c in checks_of(record).items()]
    return pd.DataFrame(out).groupby("checked", sort=False).agg(**{
        "builds": ("inputs", "size"), "bit-identical": ("bit-identical", "sum"), "inputs": ("inputs", "min"),
        "alphas": ("alphas", "min"), "grads": ("grads", "min"), "mismatches": ("mismatches", "sum"),
        "at the 6 required alphas": ("required", "sum"), "alphas with any": ("any", "max")})


def budget_frame(record: dict) -> pd.DataFrame:
    """Each counted kernel's thread instructions per element against its dtype's budget, its issue and DRAM shares
    (ncu), and its static SASS. The budget: the thread instructions per element that can issue in the dtype's copy_
    time, SMs x 4 schedulers x 32 lanes x SM clock (the median of NVML's per-round medians over the dtype's rows)
    x copy_'s time / elements; NaN without an NVML sample."""
    out, sms = [], record["provenance"]["sm_count"]
    for dtype in DTYPES:
        mhz = float(pd.Series([s["sm_clock_mhz"]["median"] for r in rows_of(record, dtype)
                               for s in r["timing"].get("nvml", []) if s.get("samples")]).median())
        per = sms * SCHEDULERS * LANES * mhz * 1e6 * ms(record, f"copy_ {dtype}") * 1e-3 / record["problem"]["numel"]
        for n in (r["name"] for r in rows_of(record, dtype)):
            if (k := counter(record, n)) is not None:
                bound = issue_bound(pct := issue_pct(record, n))
                out.append({"entry": n, "x own copy_": x_own_copy(record, n)[0], "SM MHz": mhz, "budget inst/elem": per,
                            "inst/elem": k, "used %": 100 * k / per, "issue %": pct,
                            "issue-bound": "" if bound is None else "yes" if bound else "no",
                            "DRAM %": counter(record, n, "dram_pct_of_peak"),
                            "SASS (static, 8 elem/thread)": record.get("sass16", {}).get(n, {}).get("instructions")})
    return pd.DataFrame(out).set_index("entry") if out else pd.DataFrame()


def graded_frame(record: dict) -> pd.DataFrame:
    """The prediction beside the record: HELD inside its range, else MISSED ("MISSED (faster)" for a time under it)."""
    out, earlier = [], fingerprint.earlier_variants(record)
    for (name, what), (lo, hi) in PREDICTION.items():
        value = (x_own_copy(record, name)[0] if what == "x own copy_" else counter(record, name)
                 if what == "inst/elem" else checks_of(record)[name]["mismatches"])
        verdict = "NOT MEASURED" if value is None else as_built(
            "HELD" if lo <= value <= hi else "MISSED (faster)" if what == "x own copy_" and value < lo else "MISSED",
            earlier, ENTRIES[name].variant)
        out.append({"entry": name, "what": what, "predicted": f"{SHOWN[what].format(lo)} to {SHOWN[what].format(hi)}",
                    "measured": "" if value is None else SHOWN[what].format(value), "verdict": verdict})
    return pd.DataFrame(out).set_index("entry")


def goals_frame(record: dict) -> pd.DataFrame:
    """Issue 24's goals (GOALS): each default's time over its own roof against the aim and the must (short rounds;
    a row whose kernel's build changed since the record says "(earlier build)")."""
    earlier = fingerprint.earlier_variants(record)
    return pd.DataFrame([{"entry": n, "x own roof": x, "aim": f"{aim:.2f}", "must": f"{must:.2f}",
                          "verdict": as_built("aim met" if x <= aim else "must met" if x <= must else "NOT met",
                                              earlier, ENTRIES[n].variant)}
                         for n, (aim, must) in GOALS.items() for x in [x_own_copy(record, n)[0]]]).set_index("entry")


def failures(record: dict) -> list[str]:
    """What must hold in every run: every build meant to be exact is, on every bit pattern at every alpha."""
    return [n for n, c in checks_of(record).items() if c["expect_exact"] and not exact(c)]
