"""What the model record says (no GPU needed): medians, overlaps, ELU's share of the MLP step, the ratios the
notebook quotes, the ops' signatures, and the run's text summary.

Schema 3 (``routes``, ``host_table``, ``host_summary``, ``profile_table``, ``double_backward_table``,
``routing_table``, ``autocast_summary``) reads what schema 2 lacks: the fusion routes, the host's cost per
call, double backward, routing and autocast. ``summary`` reads what both have."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from elu_study.core.record import REFERENCE_GPU, load, read, record_path
from elu_study.jobs.model.host import AFTER, AFTER_GRAD, BEFORE, BEFORE_GRAD
from elu_study.jobs.model.measure import (FUSED_DROPIN, FUSED_FELU, FUSED_OP, GRAPH_EAGER, GRAPH_REPLAY, MLP_OPAQUE,
                                          THREE_STREAMS)

BACKWARD_STREAMS = 1.5  # grad + x read, grad_in written: 3 streams against copy_'s 2 (an estimate)
ELU_STREAMS_PER_LAYER = 5  # forward: read x, write y; backward: read grad and x, write grad_in


def read_record(gpu: str = REFERENCE_GPU, path: Path | None = None) -> dict:
    """The record; ``ELU_STUDY_MODEL_RECORD`` (a path) overrides it, to try the notebook on another record."""
    return read(path or os.environ.get("ELU_STUDY_MODEL_RECORD") or record_path(gpu, "model"), "model")


def median(record: dict, name: str) -> float:
    return record["timings"][name]["median_ms"]


def entries(record: dict, group: str) -> list[str]:
    return [name for name, e in record["entries"].items() if e["group"] == group]


def overlap(record: dict, a: str, b: str) -> bool:
    """Whether the p10-p90 ranges of two entries overlap (then no difference is measurable between them)."""
    ta, tb = record["timings"][a], record["timings"][b]
    return ta["p10_ms"] <= tb["p90_ms"] and tb["p10_ms"] <= ta["p90_ms"]


def elu_share(record: dict) -> dict:
    """What ELU should cost inside the MLP step, from bytes alone: every ELU layer moves its activations
    five times (forward: read, write; backward: read grad and x, write grad_in), at copy_'s bandwidth."""
    m = record["mlp"]
    copy_bytes = 2 * 4 * math.prod(record["shape"])
    bandwidth = copy_bytes / (median(record, "copy_") * 1e-3)  # bytes/s
    elu_bytes = ELU_STREAMS_PER_LAYER * 4 * m["depth"] * m["batch"] * m["width"]
    elu_ms = elu_bytes / bandwidth * 1e3
    step_ms = median(record, "MLP nn.ELU eager")
    return {"bandwidth_tb_s": bandwidth / 1e12, "elu_bytes": elu_bytes, "elu_ms": elu_ms, "step_ms": step_ms,
            "share": elu_ms / step_ms}


def op_signature(name: str) -> str:
    """``torch.ops.elu_study.<name>``'s arguments and returns, formatted here (not the schema's own text,
    which changes between torch versions)."""
    schema = getattr(torch.ops.elu_study, name).default._schema
    args = []
    for a in schema.arguments:
        written = a.alias_info is not None and a.alias_info.is_write
        args.append(f"{a.name}: {a.type}" + (" (written in place)" if written else ""))
    returns = ", ".join(str(r.type) for r in schema.returns) or "None"
    return f"elu_study::{name}({', '.join(args)}) -> {returns}"


def summary(record: dict) -> dict:
    """The ratios the notebook and the closing note quote, all from the record."""
    copy_ms = median(record, "copy_")
    v = record["variants"][0]
    out = {
        "copy_ms": copy_ms,
        "forward_ms": median(record, f"op {v}"),
        "felu_ms": median(record, "F.elu"),
        "backward_ms": median(record, f"op backward {v}"),
        "aten_backward_ms": median(record, "aten.elu_backward"),
        "backward_estimate_ms": BACKWARD_STREAMS * copy_ms,
        "three_streams_ms": median(record, THREE_STREAMS),
        "graph_eager_ms": median(record, GRAPH_EAGER),
        "graph_replay_ms": median(record, GRAPH_REPLAY),
        "eager_fused_ms": median(record, "eager F.elu*2+1"),
        "compiled_felu_ms": median(record, "compiled F.elu*2+1"),
        "compiled_op_ms": median(record, "compiled op*2+1"),
        "mlp_eager_ms": median(record, "MLP nn.ELU eager"),
        "mlp_eager_op_ms": median(record, "MLP elu_study.ELU eager"),
        "mlp_compiled_ms": median(record, "MLP nn.ELU compiled"),
        "mlp_compiled_op_ms": median(record, "MLP elu_study.ELU compiled"),
    }
    out["forward_x_felu"] = out["forward_ms"] / out["felu_ms"]
    out["backward_x_aten"] = out["backward_ms"] / out["aten_backward_ms"]
    out["backward_x_three_streams"] = out["backward_ms"] / out["three_streams_ms"]
    out["aten_backward_x_three_streams"] = out["aten_backward_ms"] / out["three_streams_ms"]
    out["backward_x_estimate"] = out["backward_ms"] / out["backward_estimate_ms"]
    out["graph_x_eager"] = out["graph_replay_ms"] / out["graph_eager_ms"]
    out["compiled_op_x_compiled_felu"] = out["compiled_op_ms"] / out["compiled_felu_ms"]
    out["mlp_compiled_op_x_compiled"] = out["mlp_compiled_op_ms"] / out["mlp_compiled_ms"]
    out["mlp_eager_op_x_eager"] = out["mlp_eager_op_ms"] / out["mlp_eager_ms"]
    if MLP_OPAQUE in record["timings"]:  # schema 3: "MLP elu_study.ELU compiled" is the fusing route (F.elu)
        out["mlp_compiled_opaque_ms"] = median(record, MLP_OPAQUE)
        out["mlp_compiled_opaque_x_compiled"] = out["mlp_compiled_opaque_ms"] / out["mlp_compiled_ms"]
    return out


GROUP_ORDER = ("forward", "backward", "fusion", "graph", "model")


def timing_table(record: dict, full: bool = False) -> pd.DataFrame:
    """Every timed entry, by group then median: ms, p10-p90, x copy_ (none for the MLP steps, which move
    other bytes); ``full=True`` adds each entry's description and its number of runs."""
    copy_ms = median(record, "copy_")
    rows = []
    for name, t in record["timings"].items():
        e = record["entries"][name]
        row = {"group": e["group"], "entry": name, "ms": t["median_ms"],
               "p10-p90": f"{t['p10_ms']:.3f}-{t['p90_ms']:.3f}",
               "x copy_": t["median_ms"] / copy_ms if e["group"] != "model" else math.nan}
        if full:
            row |= {"runs": t["runs"], "what": e["what"]}
        rows.append(row)
    order = {g: i for i, g in enumerate(GROUP_ORDER)}
    frame = pd.DataFrame(rows)
    frame["rank"] = frame["group"].map(lambda g: order.get(g, len(order)))
    return frame.sort_values(["rank", "ms"], kind="stable").drop(columns="rank").reset_index(drop=True)


BEYOND_NAMES = ("F.elu", "6_beyond_copy", "6_load_evict_last")


def beyond_x_copy(gpu: str = REFERENCE_GPU, names: tuple = BEYOND_NAMES) -> dict | None:
    """x copy_ of F.elu and of step 6's kernels, from notebook 08's record (the beyond job's), or None."""
    beyond = load(gpu, "beyond", required=False)
    if beyond is None:
        return None
    rows = {r["name"]: r for r in beyond["rows"]}
    return {n: rows[n]["x_copy"] for n in names if n in rows}


def grade(value: float, lo: float, hi: float) -> str:
    """A prediction's verdict: HELD if lo <= value <= hi, else MISSED."""
    return "HELD" if lo <= value <= hi else "MISSED"


def verdict(what: str, value, bounds: tuple | None = None) -> str:
    """A graded prediction as one line: a truth holds if true; a number if it lies within ``bounds`` (lo, hi)."""
    if bounds is None:
        return f"{what}: {bool(value)}: {'HELD' if value else 'MISSED'}"
    lo, hi = bounds
    said = f"at most {hi:g}" if lo == -math.inf else f"at least {lo:g}" if hi == math.inf else f"{lo:g} to {hi:g}"
    return f"{what}: {value:.3f} (predicted {said}): {grade(value, lo, hi)}"


def not_measurable(what: str, why: str) -> str:
    """A prediction the record cannot grade, as one line."""
    return f"{what}: not measurable ({why})"


def routes(record: dict) -> dict:
    """The fusion routes under torch.compile (schema 3): the chain and the MLP, each against compiled F.elu."""
    out = {"felu_ms": median(record, FUSED_FELU), "dropin_ms": median(record, FUSED_DROPIN),
           "op_ms": median(record, FUSED_OP), "mlp_felu_ms": median(record, "MLP nn.ELU compiled"),
           "mlp_dropin_ms": median(record, "MLP elu_study.ELU compiled"), "mlp_op_ms": median(record, MLP_OPAQUE)}
    for kind in ("dropin", "op"):
        out[f"{kind}_x_felu"] = out[f"{kind}_ms"] / out["felu_ms"]
        out[f"mlp_{kind}_x_felu"] = out[f"mlp_{kind}_ms"] / out["mlp_felu_ms"]
    out["dropin_overlaps_felu"] = overlap(record, FUSED_DROPIN, FUSED_FELU)
    out["mlp_dropin_overlaps_felu"] = overlap(record, "MLP elu_study.ELU compiled", "MLP nn.ELU compiled")
    return out


def host_table(record: dict) -> pd.DataFrame:
    """The host's time per call (µs, median of the repeats), one row per route, one column per size."""
    host = record["host"]
    rows = {name: {n: r["us"][str(n)]["median"] for n in host["sizes"]} for name, r in host["routes"].items()}
    return pd.DataFrame.from_dict(rows, orient="index")


def host_summary(record: dict) -> dict:
    """Each route's host time per call, median over the sizes (µs), and the ratios the notebook grades."""
    table = host_table(record)
    us = {name: float(np.median(row.values)) for name, row in table.iterrows()}
    return {"us": us, "after_x_felu": us[AFTER] / us["F.elu"], "before_x_felu": us[BEFORE] / us["F.elu"],
            "after_x_before": us[AFTER] / us[BEFORE], "after_minus_binding_us": us[AFTER] - us["binding"],
            "after_grad_x_felu_grad": us[AFTER_GRAD] / us["F.elu, requires_grad"],
            "before_grad_x_felu_grad": us[BEFORE_GRAD] / us["F.elu, requires_grad"],
            "module_x_nn_module": us["elu_study.ELU module"] / us["nn.ELU module"]}


PROFILER_OWN = "Activity Buffer Request"  # the profiler's own buffer request, once per profiled window


def profiler_share(record: dict, route: str) -> float:
    """The share of a route's profiled time per call that is the profiler's own ``PROFILER_OWN`` event."""
    p = record["host"]["profile"]["routes"][route]
    own = sum(e["self_us"] for e in p["top"] if e["name"] == PROFILER_OWN)  # self µs per call, as every event
    return own / p["profiled_us_per_call"]


def python_frames(record: dict) -> list[str]:
    """The profiled events that are Python-level frames (a ``.py`` path or a ``built-in method``)."""
    return [e["name"] for p in record["host"]["profile"]["routes"].values() for e in p["top"]
            if ".py" in e["name"] or "built-in method" in e["name"]]


def profile_table(record: dict, route: str, top: int = 8) -> pd.DataFrame:
    """A route's top host events under torch.profiler, per call: name, count, self µs."""
    rows = record["host"]["profile"]["routes"][route]["top"][:top]
    return pd.DataFrame(rows, columns=["name", "count", "self_us"])


def double_backward_table(record: dict) -> pd.DataFrame:
    """Per step: largest |difference| from F.elu's gradient and second derivatives, bit for bit, passed."""
    rows = []
    for step, r in record["double_backward"]["steps"].items():
        rows.append({"step": step, **{f"max |err| {k}": v for k, v in r["max_abs_err"].items()},
                     "bit for bit": r["bit_identical"], "passed": r["passed"]})
    return pd.DataFrame(rows)


def routing_table(record: dict) -> pd.DataFrame:
    """Per (device, dtype): who computes it, the kernels that ran, results against F.elu, what strict does."""
    rows = [{"device": c["device"], "dtype": c["dtype"], "route": c["route"],
             "kernels run": ", ".join(c["builds_run"]) or "none", "forward": bits(c["forward"]),
             "backward": bits(c["backward"]), "strict=True": c["strict"].split(":")[0]}
            for c in record["routing"]["cases"]]
    return pd.DataFrame(rows)


def bits(comparison: dict) -> str:
    return "bit for bit" if comparison["bit_identical"] else f"max |err| {comparison['max_abs_err']:.2g}"


def autocast_summary(record: dict) -> dict:
    a = record["autocast"]
    return {"forward_bit_identical": a["forward"]["bit_identical"], "losses_identical": a["losses_identical"],
            "max_rel_loss_diff": a["max_rel_loss_diff"], "first_loss": a["losses"]["nn.ELU"][0],
            "last_loss": a["losses"]["nn.ELU"][-1], "steps": a["steps"], "variant16": a["variant16"]}


def describe_dropin(record: dict) -> list[str]:
    """The schema-3 lines of the run's text: routes, host cost, double backward, routing, autocast."""
    r, h, a = routes(record), host_summary(record), autocast_summary(record)
    db = record["double_backward"]
    return [
        f"fusion routes: compiled F.elu {r['felu_ms']:.3f} ms, drop-in {r['dropin_ms']:.3f} ms "
        f"({r['dropin_x_felu']:.3f}x), opaque op {r['op_ms']:.3f} ms ({r['op_x_felu']:.3f}x); MLP compiled: drop-in "
        f"{r['mlp_dropin_x_felu']:.3f}x, opaque op {r['mlp_op_x_felu']:.3f}x nn.ELU's",
        "host per call (median over sizes, us): " + ", ".join(f"{k} {v:.2f}" for k, v in h["us"].items()),
        f"host: library.elu {h['after_x_felu']:.2f}x F.elu (op dispatch: {h['before_x_felu']:.2f}x); with "
        f"requires_grad {h['after_grad_x_felu_grad']:.2f}x (op: {h['before_grad_x_felu_grad']:.2f}x)",
        "double backward: " + ", ".join(f"{v} {'ok' if s['passed'] else 'FAILED'}" for v, s in db["steps"].items())
        + f"; gradgradcheck float64: {db['gradgradcheck_float64']['all_passed']}",
        "routing: " + "; ".join(f"{c['device']} {c['dtype']} -> {c['route']}" for c in record["routing"]["cases"]),
        f"bf16 autocast: forward bit for bit {a['forward_bit_identical']}, losses identical {a['losses_identical']} "
        f"(max rel diff {a['max_rel_loss_diff']:.2g})",
    ]


def describe(record: dict) -> str:
    """The run in text: every timing, then the ratios, the checks that matter and the losses."""
    s = summary(record)
    v = record["variants"][0]
    lines = [f"{name:<28} {t['median_ms']:8.3f} ms  (p10 {t['p10_ms']:.3f}, p90 {t['p90_ms']:.3f}; {t['runs']} runs)"
             for name, t in record["timings"].items()]
    lines += [
        "",
        f"forward  op {v}: {s['forward_ms']:.3f} ms = {s['forward_x_felu']:.3f}x F.elu ({s['felu_ms']:.3f} ms)",
        f"backward op {v}: {s['backward_ms']:.3f} ms = {s['backward_x_aten']:.3f}x aten.elu_backward "
        f"({s['aten_backward_ms']:.3f} ms), {s['backward_x_three_streams']:.3f}x torch.add's three streams "
        f"({s['three_streams_ms']:.3f} ms; aten: {s['aten_backward_x_three_streams']:.3f}x); "
        f"1.5x copy_ (an estimate) would be {s['backward_estimate_ms']:.3f} ms",
        f"CUDA graph: op fwd+bwd replayed {s['graph_replay_ms']:.3f} ms vs eager {s['graph_eager_ms']:.3f} ms "
        f"({s['graph_x_eager']:.3f}x); replay equal to eager: {record['checks']['cuda_graph']}",
        f"fusion: eager {s['eager_fused_ms']:.3f} ms, compiled F.elu {s['compiled_felu_ms']:.3f} ms, "
        f"compiled op {s['compiled_op_ms']:.3f} ms ({s['compiled_op_x_compiled_felu']:.2f}x)",
        f"MLP fwd+bwd: eager {s['mlp_eager_ms']:.3f} vs {s['mlp_eager_op_ms']:.3f} ms; compiled {s['mlp_compiled_ms']:.3f} "
        f"vs {s['mlp_compiled_op_ms']:.3f} ms (graph breaks: {record['checks']['mlp_compiled']['graph_breaks']})",
        "losses nn.ELU       : " + " ".join(f"{x:.5f}" for x in record["losses"]["nn.ELU"]),
        "losses elu_study.ELU: " + " ".join(f"{x:.5f}" for x in record["losses"]["elu_study.ELU"]),
    ]
    if "host" in record:  # schema 3
        lines += describe_dropin(record)
    return "\n".join(lines)
