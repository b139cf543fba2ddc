"""What the model record says (no GPU needed): medians, overlaps, ELU's share of the MLP step, the ratios the
notebook quotes, the ops' signatures, and the run's text summary."""

from __future__ import annotations

import math
import os
from pathlib import Path

import torch

from elu_study.core.record import REFERENCE_GPU, read, record_path
from elu_study.jobs.model.measure import GRAPH_EAGER, GRAPH_REPLAY, THREE_STREAMS

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
    return out


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
    return "\n".join(lines)
