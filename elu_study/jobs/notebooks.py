"""``python -m elu_study notebooks [NOTEBOOK ...]``: execute the notebooks in place, so that their committed outputs
are a real run (on the GPU whose numbers they should carry)."""

import argparse
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat  # the notebooks job's own dependencies: jupyter's, installed with the test extra
from nbclient import NotebookClient
from tqdm import tqdm

from elu_study.core.paths import NOTEBOOKS_DIR


def execute(path: Path, timeout_s: int = 1800) -> str | None:
    """Execute one notebook in place; its failure as a line (None: it ran)."""
    try:
        nb = nbformat.read(path, as_version=4)
        resources = {"metadata": {"path": str(path.parent)}}
        NotebookClient(nb, timeout=timeout_s, kernel_name="python3", resources=resources).execute()
        written = path.with_name(f".{path.name}.tmp")  # then renamed over it: a reader never sees it half written
        nbformat.write(nb, written)
        os.replace(written, path)
    except Exception as err:  # noqa: BLE001 - any failure of one notebook is reported, the rest still run
        return f"FAILED {path.name}: {type(err).__name__}: {str(err)[-2000:]}"
    return None


def main(argv: list[str] | None = None) -> int:
    """Execute the notebooks, several at once; one that fails is reported and left as it was."""
    parser = argparse.ArgumentParser(prog="python -m elu_study notebooks", description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, help="notebooks (default: all of notebooks/)")
    parser.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1), help="notebooks at once")
    args = parser.parse_args(argv)
    paths = args.paths or sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
    with ProcessPoolExecutor(max_workers=max(1, min(args.jobs, len(paths)))) as pool:
        lines = list(tqdm(pool.map(execute, paths), total=len(paths), desc="executing notebooks", unit="notebook"))
    failed = [path.name for path, line in zip(paths, lines) if line is not None]
    if failed:
        print(*filter(None, lines), sep="\n", file=sys.stderr)
        print(f"{len(failed)} of {len(paths)} notebooks failed: {', '.join(sorted(failed))}", file=sys.stderr)
    return 1 if failed else 0

