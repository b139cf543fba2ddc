"""Everything a record regenerates without a GPU: the figures under results/ and the README block."""

from __future__ import annotations

from pathlib import Path

from elu_study.jobs.study import findings
from elu_study.jobs.study import figures as plots
from elu_study.jobs import profile
from elu_study.core import record as results
from elu_study.core.hardware import slug
from elu_study.core.entries import PEERS, STEPS, group, grid_stride_blocks

ZOOM = ("copy_", "copy_kernel", "F.elu", "torch.compile(F.elu)", "F.elu_", *(e.name for e in STEPS),
        *(e.name for e in PEERS))


def _present(record: dict, names) -> list[str]:
    """The names a record holds (a record made before an entry existed lacks its row)."""
    held = {r["name"] for r in record["rows"]}
    return [n for n in names if n in held]


WAVE_SWEEP = ("3_grid_stride_1_waves", "3_grid_stride_2_waves", "3_grid_stride_8_waves", "3_grid_stride_64_waves",
              "3_grid_stride_512_waves", "3_grid_stride_one_shot")


def wave_blocks(record: dict) -> dict[str, int]:
    """Grid size of every grid-stride entry at the record's size, on the record's GPU."""
    sms, numel = record["provenance"]["sm_count"], record["problem"]["numel"]
    return {n: grid_stride_blocks(n, sms, numel) for n in (*WAVE_SWEEP, "3_grid_stride")}


STEP5_ABLATIONS = ("2_float4", *(e.name for e in group("step5_one_change")), "5_streaming", "5_streaming_expf")


def figures(record: dict, counters: dict | None, only: str | None = None) -> dict[str, object]:
    """name -> matplotlib figure, for every figure the README and notebooks show (or just ``only``)."""
    makers = {
        "times": lambda: plots.times_figure(record),
        "xcopy": lambda: plots.xcopy_figure(record, names=_present(record, ZOOM)),
        "distributions": lambda: plots.distribution_figure(record, names=_present(record, ZOOM)),
        "waves": lambda: plots.wave_sweep_figure(record, list(WAVE_SWEEP), wave_blocks(record)),
        "ablations": lambda: plots.xcopy_figure(record, names=list(STEP5_ABLATIONS), kinds=None,
                                                title="Step 5's changes, one at a time, from step 2"),
    }
    if counters:
        makers["counters"] = lambda: plots.counters_figure(counters, [r["name"] for r in counters["rows"]])
    if only is not None:
        if only not in makers:
            raise KeyError(f"no figure {only!r}; figures: {', '.join(makers)}")
        makers = {only: makers[only]}
    return {name: make() for name, make in makers.items()}


def write(gpu: str, readme: bool = True) -> list[Path]:
    """Save every figure of a GPU's records under results/, and (for the reference GPU) the README block."""
    record = results.load(gpu)
    counters = profile.load(gpu)
    paths = []
    for name, fig in figures(record, counters).items():
        suffix = "" if name == "times" else f"-{name}"
        paths.append(plots.save(fig, results.RESULTS_DIR / f"{slug(record['provenance']['gpu'])}{suffix}.png"))
    if readme:
        rel = lambda p: p.relative_to(results.README.parent).as_posix()  # noqa: E731
        extra = ["", *findings.readme_lines(record, counters), "",
                 *(f"![{p.stem}]({rel(p)})" for p in paths)]
        results.update_readme(record, extra)
        paths.append(results.README)
    from elu_study.jobs import sizes# the size sweep's figures and README block, where its record exists

    swept = sizes.load(gpu)
    if swept is not None:
        paths += sizes.write(swept, readme=readme)
    from elu_study.jobs import beyond# step 6's attempts: figures and README block, where its record exists

    attempts = beyond.load(gpu)
    if attempts is not None:
        paths += beyond.figures(attempts)
        if readme:
            paths.append(beyond.update_readme(attempts))
    return paths
