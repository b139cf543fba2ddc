"""The GPU test suite's settings (examples per fuzz test, the builds, the seed: tests/conftest.py reads them from the
command line) and its record, ``results/<gpu>-tests.json``, written after a run in which GPU tests ran on a GPU."""

import contextlib
import datetime as dt
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from elu_study.core import record

DEFAULT_FUZZ_EXAMPLES = 60  # per fuzz test: every kernel file fuzzes in well under a minute on an H200
BUILD_SETS = ("files", "all")  # one default build per kernel file, or every build the study compiles
GPU_TEST_FILES = ("tests/test_gpu.py",)  # GPU tests without the marker; the fuzz and sanitizer ones carry it
GPU_MARKER = "gpu"
OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")


@dataclass(frozen=True)
class FuzzSettings:
    examples: int  # hypothesis max_examples per fuzz test
    seed: int | str  # the seed every fuzz test derives its own from
    builds: str  # "files" or "all"

    def to_dict(self) -> dict:
        return {"examples_per_test": self.examples, "hypothesis_seed": self.seed, "builds": self.builds,
                "rerun_with": f"--hypothesis-seed={self.seed} --fuzz-examples={self.examples} --fuzz-builds={self.builds}"}


def fuzz_settings(examples: int | None = None, seed: str | int | None = None, builds: str | None = None) -> FuzzSettings:
    """The command line's values, else a fresh seed and one build per kernel file (every build with more examples)."""
    examples = DEFAULT_FUZZ_EXAMPLES if examples is None else examples
    if examples < 1:
        raise ValueError(f"the fuzz budget must be at least 1 example per test, got {examples}")
    seed = secrets.randbits(32) if seed is None else seed
    with contextlib.suppress(ValueError):  # hypothesis takes any hashable seed
        seed = int(seed)
    return FuzzSettings(examples, seed, builds or ("all" if examples > DEFAULT_FUZZ_EXAMPLES else "files"))


SETTINGS_KEY = pytest.StashKey[FuzzSettings]()  # where a run's FuzzSettings live in pytest's config.stash


def settings_from_config(config) -> FuzzSettings:
    """The run's FuzzSettings, from pytest's options (tests/conftest.py adds them), made once per run."""
    if SETTINGS_KEY not in config.stash:
        config.stash[SETTINGS_KEY] = fuzz_settings(*(config.getoption(name, default=None)
                                                     for name in ("fuzz_examples", "hypothesis_seed", "fuzz_builds")))
    return config.stash[SETTINGS_KEY]


def summarize(stats: dict[str, list]) -> dict:
    """The counts per outcome and the failed tests, from pytest's terminal-reporter stats (outcome -> reports)."""
    return {"counts": {outcome: len(stats.get(outcome, [])) for outcome in OUTCOMES},
            "failures": sorted(r.nodeid for outcome in ("failed", "error") for r in stats.get(outcome, []))}


def ran_on_gpu(stats: dict[str, list]) -> bool:
    """Whether any GPU test was run rather than skipped: only such a run is worth a record."""
    return any(getattr(r, "nodeid", "").split("::")[0] in GPU_TEST_FILES or GPU_MARKER in getattr(r, "keywords", {})
               for outcome in ("passed", "failed") for r in stats.get(outcome, []))


SELECTING = ("-k", "-m", "--deselect", "--lf", "--last-failed")  # options that run part of the suite


def partial(args: list[str]) -> bool:
    """Whether pytest's arguments select part of the suite: a -k or -m expression, a deselection, the last failures,
    a test file or a test by its id (a folder, the whole suite's or notebooks/, does not)."""
    return any(a.startswith(SELECTING) or "::" in a or a.endswith((".py", ".ipynb")) for a in args)


def write_record(stats: dict[str, list], fuzz: FuzzSettings, args: list[str], results_dir: Path | None,
                 gpu_available: Callable[[], bool], provenance: Callable[[], dict],
                 duration_s: float | None = None) -> Path | None:
    """Save the run's record (job "tests") in ``results_dir`` (None: the repository's results/) if GPU tests ran on a
    GPU here, the whole suite (not ``partial``), and return its path; else write nothing (a CPU run, CI's, or a few
    tests', leaves the tree as it was) and return None."""
    if not ran_on_gpu(stats) or partial(args) or not gpu_available():
        return None
    return record.save({
        "date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": "python -m pytest " + " ".join(args),
        "duration_s": None if duration_s is None else round(duration_s, 1),
        **summarize(stats),
        "fuzz": fuzz.to_dict(),
        "provenance": provenance(),
    }, "tests", results_dir)
