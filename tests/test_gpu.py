"""The kernels on a GPU: every input they accept, and clear errors for those they do not."""

import pytest
import torch
import torch.nn.functional as F

from elu_study import compile_variant, known_variants
from elu_study.core.check import ATOL, RTOL
from elu_study.core.ops import OPS, accepted_dtypes

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="needs a CUDA GPU: these run the kernels (the compile and SASS tests run without one)",
)
VARIANTS = list(known_variants())


@pytest.fixture(scope="module", params=VARIANTS)
def module(request):
    return compile_variant(request.param)


def randn(n, seed=0, scale=4.0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(n, device="cuda", generator=g) * scale


def assert_elu(y, x, alpha):
    assert not torch.isnan(y).any(), "unwritten (NaN-poisoned) elements remain"
    torch.testing.assert_close(y, F.elu(x, alpha), atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize("n", [1, 3, 4, 5, 4097, 2**20 + 3])
def test_odd_lengths(module, n):
    x = randn(n, seed=n)
    out = torch.full_like(x, float("nan"))
    assert_elu(module.elu(x, 1.0, out=out), x, 1.0)


@pytest.mark.parametrize("offset", [1, 2, 3])
def test_misaligned_views(module, offset):
    base = randn(2**16 + 7)
    x = base[offset:]  # data pointer not on a 16-byte boundary
    assert x.data_ptr() % 16 != 0
    assert_elu(module.elu(x, 1.0), x, 1.0)
    out_base = torch.full_like(base, float("nan"))
    out = out_base[offset:]  # misaligned output too
    assert_elu(module.elu(x, 1.0, out=out), x, 1.0)


def test_non_contiguous_input(module):
    x = randn(1024 * 515).view(1024, 515).t()[:, ::3]
    assert not x.is_contiguous()
    y = module.elu(x, 0.7)
    assert y.shape == x.shape
    assert_elu(y, x, 0.7)


@pytest.mark.parametrize("alpha", [1.0, 0.5, 2.5, 1e-3, -1.0, 0.0])
def test_runtime_alpha(module, alpha):
    x = randn(10_003, seed=7)
    assert_elu(module.elu(x, alpha), x, alpha)


def test_special_values(module):
    specials = torch.tensor([float("nan"), float("-inf"), float("inf"), -0.0, 0.0, -1e-30, 1e-30, -88.0, -104.0, 88.0],
                            device="cuda")
    x = torch.cat([specials, randn(1000)])
    y = module.elu(x, 1.5)
    ref = F.elu(x, 1.5)
    assert torch.isnan(y[0])
    assert y[1].item() == -1.5 and y[2].item() == float("inf")
    torch.testing.assert_close(y[1:], ref[1:], atol=ATOL, rtol=RTOL)


def test_in_place_and_shapes(module):
    x = randn(3 * 5 * 7 * 11).view(3, 5, 7, 11)
    ref = F.elu(x, 1.0)
    y = module.elu(x, 1.0, out=x)
    assert y.data_ptr() == x.data_ptr()
    torch.testing.assert_close(y, ref, atol=ATOL, rtol=RTOL)
    assert module.elu(torch.empty(0, 4, device="cuda")).shape == (0, 4)


def test_runs_on_the_current_stream(module):
    """If the kernel ignored the current stream it would read x before the fill below lands."""
    src = randn(1 << 22, seed=3)
    x = torch.zeros_like(src)
    out = torch.full_like(src, float("nan"))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)  # tens of milliseconds of GPU time before the fill
        x.copy_(src)
        module.elu(x, 1.0, out=out)
    torch.cuda.synchronize()
    assert_elu(out, src, 1.0)


def test_other_device_index_is_respected(module):
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    x = randn(4097).to("cuda:1")
    y = module.elu(x, 1.0)
    assert y.device == x.device
    assert_elu(y.cpu(), x.cpu(), 1.0)


@pytest.mark.parametrize(
    "bad, error, message",
    [
        (lambda: torch.randn(8), ValueError, "must be a CUDA tensor"),
        (lambda: torch.randn(8, device="cuda", dtype=torch.float16), TypeError, "must be float32"),
        (lambda: torch.randn(8, device="cuda", dtype=torch.float64), TypeError, "must be float32"),
        (lambda: torch.arange(8, device="cuda"), TypeError, "must be float32"),
    ],
)
def test_bad_inputs_raise_clear_errors_and_the_context_survives(module, bad, error, message):
    x = bad()
    if x.is_cuda and x.dtype in accepted_dtypes(module, OPS["elu"]):
        y = module.elu(x, 1.0)  # step 6 takes float16: a result, in float16, not an error
        assert y.dtype == x.dtype
        return
    with pytest.raises(error, match=message):
        module.elu(bad(), 1.0)
    x = randn(4099)
    assert_elu(module.elu(x, 1.0), x, 1.0)
    torch.cuda.synchronize()


def test_bad_out_and_alpha(module):
    x = randn(64)
    with pytest.raises(ValueError, match=r"out has shape \(65,\) but input has shape \(64,\)"):
        module.elu(x, 1.0, out=torch.empty(65, device="cuda"))
    with pytest.raises(TypeError, match="out must be float32"):
        module.elu(x, 1.0, out=torch.empty(64, device="cuda", dtype=torch.float16))
    with pytest.raises(ValueError, match="out must be a CUDA tensor"):
        module.elu(x, 1.0, out=torch.empty(64))
    with pytest.raises(ValueError, match="alpha must be finite"):
        module.elu(x, float("nan"))
    with pytest.raises(RuntimeError, match="out shares memory with the input"):
        module.elu(x[:-1], 1.0, out=x[1:])
    assert_elu(module.elu(x, 1.0), x, 1.0)


@pytest.mark.parametrize("name", VARIANTS)
def test_more_than_2_to_the_31_elements(name):
    """64-bit indexing: elements past index 2^31 are computed, not wrapped onto the start."""
    n = 2**31 + 4 * 1024 + 3
    free, _ = torch.cuda.mem_get_info()
    if free < 3 * 4 * n + (1 << 30):
        pytest.skip(f"needs {3 * 4 * n / 2**30:.0f} GiB of free GPU memory")
    module = compile_variant(name)
    x = torch.empty(n, device="cuda")
    x[: 1 << 20] = randn(1 << 20, seed=1)  # distinct values at both ends
    x[-(1 << 20):] = randn(1 << 20, seed=2)
    x[1 << 20 : -(1 << 20)] = -0.5
    out = torch.full_like(x, float("nan"))
    module.elu(x, 1.3, out=out)
    torch.cuda.synchronize()
    for part in (slice(0, 1 << 20), slice(-(1 << 20), None), slice(2**31 - 5, 2**31 + 5)):
        assert_elu(out[part], x[part], 1.3)
    assert not torch.isnan(out).any()
    del x, out
    torch.cuda.empty_cache()
