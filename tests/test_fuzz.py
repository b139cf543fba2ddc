"""Property-based fuzzing of every kernel on the GPU (elu_study.testing: strategies draws, fuzz checks).

Every op of every build (one default build per kernel file; every build of the study with
``--fuzz-builds all`` or a larger ``--fuzz-examples``): random lengths, shapes, layouts, offsets,
alphas, values and outputs, each result against PyTorch, guard bands and inputs bit for bit; and
random bad calls, each raising its documented error with the next call still right. The budget and
the seed are in the run's header line; ``--hypothesis-seed=S`` repeats a run exactly.
"""

from pathlib import Path

import pytest
import torch

pytestmark = [
    pytest.mark.skipif(
        not torch.cuda.is_available(),
        reason="needs a CUDA GPU: the fuzz tests run the kernels (tests/test_fuzz_harness.py tests the harness without one)",
    ),
    pytest.mark.gpu,
]
pytest.importorskip("hypothesis", reason="the fuzz tests need hypothesis: pip install -e '.[test]'")

from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from elu_study.core.build import build_all, compile_variant  # noqa: E402
from elu_study.core.entries import ENTRIES, build_id, computes_elu, fuzz_builds  # noqa: E402
from elu_study.core.ops import OPS, accepted_dtypes  # noqa: E402
import fuzzing as fuzz  # noqa: E402 - the fuzz harness beside the tests (it needs hypothesis, the test extra)
import strategies  # noqa: E402
from elu_study.testing.suite import settings_from_config  # noqa: E402


PLANTED = Path(__file__).parent / "data" / "planted_oob.cu"  # writes one element past the output's end
INEXACT_16 = ("6_16bit_expf", "7_unchecked")  # entries whose 16-bit results are not PyTorch's bits, by design


def exact_at_16_bits(variant: str, flags: tuple[str, ...] = ()) -> bool:
    """Whether a build's 16-bit path (if it has one) claims PyTorch's bits: no entry of it is one of INEXACT_16."""
    return not any(e.variant == variant and e.flags == tuple(flags) and e.name.split()[0] in INEXACT_16
                   for e in ENTRIES.values())


def pytest_generate_tests(metafunc):
    if "build" in metafunc.fixturenames:
        builds = fuzz_builds(settings_from_config(metafunc.config).builds)
        metafunc.parametrize("build", builds, ids=[build_id(*b) for b in builds], scope="module")


@pytest.fixture(scope="session")
def built(fuzz_settings):
    """Every build to fuzz and the planted fault, compiled side by side once (the disk cache serves repeats)."""
    jobs = fuzz_builds(fuzz_settings.builds)
    build_all([*jobs, (str(PLANTED), ())])
    return jobs


@pytest.fixture(scope="module")
def module(build, built):
    variant, flags = build
    return compile_variant(variant, extra_cuda_cflags=list(flags))


@pytest.fixture(scope="session")
def device():
    return torch.device("cuda", torch.cuda.current_device())


def _settings(fuzz_settings):
    return settings(
        max_examples=fuzz_settings.examples,
        deadline=None,  # the first call of a build, or a 4-million-element case, takes what it takes
        database=None,  # nothing written into the work tree; the seed repeats a run
        derandomize=False,
        print_blob=True,
        suppress_health_check=list(HealthCheck),
    )


@pytest.mark.parametrize("op_name", list(OPS))
def test_every_case_matches_pytorch_and_writes_nothing_else(module, build, op_name, fuzz_settings, device):
    if not hasattr(module, op_name):
        pytest.skip(f"{build_id(*build)} has no {op_name}")
    op, fn = OPS[op_name], getattr(module, op_name)
    # a copy kernel's results are not ELU's (its accesses are fuzzed all the same); its backward is the shared one
    compare = computes_elu(*build) or op_name != "elu"
    sm_count = torch.cuda.get_device_properties(device).multi_processor_count
    # float16 and bfloat16 too where the build's op takes them (steps 6 and 7, CUB): compared bit for bit
    dtypes = accepted_dtypes(module, op) if exact_at_16_bits(*build) else (torch.float32,)

    @seed(f"{fuzz_settings.seed}:{build_id(*build)}:{op_name}")
    @_settings(fuzz_settings)
    @given(case=strategies.cases(op, strategies.lengths(sm_count=sm_count), dtypes=dtypes))
    def holds(case):
        fuzz.check_case(fn, op, case, device, compare)

    holds()
    torch.cuda.synchronize()


@pytest.mark.parametrize("op_name", list(OPS))
def test_bad_calls_raise_their_documented_error_and_the_next_call_works(module, build, op_name, fuzz_settings, device):
    if not hasattr(module, op_name):
        pytest.skip(f"{build_id(*build)} has no {op_name}")
    op, fn = OPS[op_name], getattr(module, op_name)
    other = f"cuda:{(device.index + 1) % torch.cuda.device_count()}" if torch.cuda.device_count() > 1 else None
    places = ("device", "device", "foreign", "meta") + (("other",) if other else ())
    compare = computes_elu(*build) or op_name != "elu"  # a copy kernel's build still has the real backward
    dtypes = accepted_dtypes(module, op)  # step 6's elu also takes float16 and bfloat16

    @seed(f"{fuzz_settings.seed}:{build_id(*build)}:bad" + ("" if op_name == "elu" else f":{op_name}"))
    @_settings(fuzz_settings)
    @given(bad=strategies.bad_calls(places, op=op), follow=st.integers(0, 2**31 - 1))
    def holds(bad, follow):
        fuzz.check_bad_call(fn, bad, device, "cpu", other, compare, op=op, dtypes=dtypes)
        fuzz.check_still_works(fn, device, follow, compare, op=op)

    holds()
    torch.cuda.synchronize()


def test_the_properties_catch_a_planted_overrun(built, fuzz_settings, device):
    """A kernel that writes one element past its output must fail the properties: the guard bands see it.

    Only cases with a guard band after the output (out given, or in place) are drawn: past a fresh
    output, the stray write could land outside any allocation and end the process's CUDA context."""
    planted = compile_variant(PLANTED)
    op = OPS["elu"]

    @seed(f"{fuzz_settings.seed}:planted")
    @settings(max_examples=200, deadline=None, database=None, phases=[Phase.generate], report_multiple_bugs=False,
              suppress_health_check=list(HealthCheck))
    @given(case=strategies.cases(op).filter(lambda c: c.out != "none"))
    def holds(case):
        fuzz.check_case(planted.elu, op, case, device)

    with pytest.raises(AssertionError, match=r"guard band after (out|in-place x)"):
        holds()
    torch.cuda.synchronize()
