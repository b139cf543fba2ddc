"""The fuzz tests' budget and seed, and the record of a test run on a GPU.

``--fuzz-examples N`` sets how many examples hypothesis draws per fuzz test (default
elu_study.testing.suite.DEFAULT_FUZZ_EXAMPLES); a budget above the default also fuzzes every build of the study
rather than one per kernel file, unless ``--fuzz-builds files|all`` says otherwise. The seed is hypothesis's
``--hypothesis-seed``, else a fresh random one; it is printed in the header and the summary, so any run can be
repeated exactly.
``pytest -m sanitize`` runs the compute-sanitizer tests alone; ``-m gpu`` the fuzz and sanitizer ones.

After a run in which GPU tests ran, results/<gpu>-tests.json records the counts, the failures, the
fuzz budget and seed, and the provenance. Without a GPU nothing is written.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from elu_study.core import fingerprint
from elu_study.core.hardware import provenance
from elu_study.testing import suite

_STARTED = pytest.StashKey[float]()


@pytest.fixture()
def as_of_this_tree(monkeypatch):
    """Every record read as measured from this tree's builds: no grade says "(earlier build)". For the tests of what a
    grade says, which must not change when a committed record comes to predate a kernel change."""
    monkeypatch.setattr(fingerprint, "earlier_variants", lambda record: set())


def pytest_addoption(parser):
    group = parser.getgroup("elu-study")
    group.addoption("--fuzz-examples", type=int, default=None,
                    help=f"hypothesis examples per fuzz test (default {suite.DEFAULT_FUZZ_EXAMPLES})")
    group.addoption("--fuzz-builds", choices=suite.BUILD_SETS, default=None,
                    help="fuzz one default build per kernel file, or every build of the study "
                         "(default: files, or all when --fuzz-examples exceeds the default)")


def pytest_configure(config):
    config.addinivalue_line("markers", f"{suite.GPU_MARKER}: needs a CUDA GPU (fuzzing, compute-sanitizer)")
    config.addinivalue_line("markers", "sanitize: the compute-sanitizer runs (needs a GPU and compute-sanitizer)")
    config.stash[_STARTED] = time.time()
    if torch.cuda.is_available() and getattr(config.option, "nbval_sanitize_with", None):
        # A GPU run may measure again: mask measured values there; without a GPU every number is compared.
        config.option.nbval_sanitize_with = str(Path(config.rootpath) / "notebooks" / "sanitize-gpu.cfg")
    suite.settings_from_config(config)  # made once, here: hypothesis's --hypothesis-seed, else ours


def _line(settings: suite.FuzzSettings) -> str:
    return (f"elu-study fuzz: {settings.examples} examples per test over {settings.builds} builds, hypothesis seed "
            f"{settings.seed}; repeat with {settings.to_dict()['rerun_with']}")


def pytest_report_header(config):
    return _line(suite.settings_from_config(config))


@pytest.fixture(scope="session")
def fuzz_settings(pytestconfig) -> suite.FuzzSettings:
    return suite.settings_from_config(pytestconfig)


def pytest_terminal_summary(terminalreporter, config):
    if not suite.ran_on_gpu(terminalreporter.stats):
        return
    settings = suite.settings_from_config(config)
    try:
        path = suite.write_record(terminalreporter.stats, settings, list(config.invocation_params.args),
                                  None, torch.cuda.is_available, provenance, time.time() - config.stash[_STARTED])
    except Exception as err:  # noqa: BLE001 - the record must not turn a run's verdict
        terminalreporter.write_line(f"elu-study: could not write the test record: {type(err).__name__}: {err}", red=True)
        return
    if path is not None:
        terminalreporter.write_sep("-", "elu-study GPU test record")
        terminalreporter.write_line(_line(settings))
        terminalreporter.write_line(f"wrote {path}")
