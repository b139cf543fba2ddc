"""The README's sizes block: where the sweep comes from, its checks, and its figures."""

from pathlib import Path

from elu_study.core import text
from elu_study.core.record import figure_path, readme_link, record_path
from elu_study.jobs.sizes.figures import FIGURES


def block(record: dict, figure_paths=None) -> str:
    """The block's markdown, linking ``figure_paths`` (default: the record's figures in results/)."""
    p = record["provenance"]
    checked = [q["check"]["passed"] for q in record["points"] if q.get("check")]
    paths = figure_paths or [figure_path(p["gpu"], f"sizes-{name}") for name in FIGURES]
    return text.render("sizes/readme.md.j2", p=p, file=record_path(p["gpu"], "sizes").name, sizes=record["sizes"],
                       entries=record["entries"], checked=len(checked), passed=sum(checked), errors=record["errors"],
                       figures=[(Path(q).stem, readme_link(q)) for q in paths])
