"""Execute the study's notebooks in place, so that their committed outputs are a real run.

``python -m elu_study notebooks [NOTEBOOK ...]`` (default: all of notebooks/, in order).
Run it on the GPU whose numbers the notebooks should carry.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat  # the notebooks job's own dependencies: jupyter's, installed with the test extra
from nbclient import NotebookClient
from tqdm import tqdm

from elu_study.core.paths import NOTEBOOKS_DIR


def execute(path: Path, timeout_s: int = 1800) -> None:
    nb = nbformat.read(path, as_version=4)
    resources = {"metadata": {"path": str(path.parent)}}
    NotebookClient(nb, timeout=timeout_s, kernel_name="python3", resources=resources).execute()
    nbformat.write(nb, path)


def main(argv: list[str] | None = None) -> int:
    """Execute each notebook; one that fails is reported and left as it was, and the others still run."""
    paths = [Path(p) for p in (argv if argv is not None else sys.argv[1:])] or sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
    failed = []
    for path in tqdm(paths, desc="executing notebooks", unit="notebook"):
        try:
            execute(path)
        except Exception as err:  # noqa: BLE001 - any failure of one notebook is reported, the rest still run
            failed.append(path.name)
            print(f"FAILED {path.name}: {type(err).__name__}: {str(err)[-2000:]}", file=sys.stderr)
    if failed:
        print(f"{len(failed)} of {len(paths)} notebooks failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
