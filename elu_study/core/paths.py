"""Where the study's files live: the repository's kernels/, results/, notebooks/ and README."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
KERNELS_DIR = REPO_ROOT / "kernels"
RESULTS_DIR = REPO_ROOT / "results"
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
README = REPO_ROOT / "README.md"
