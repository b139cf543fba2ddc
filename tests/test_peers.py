"""The peers: CUB's DeviceTransform as a kernels/ file and the Triton kernel, as entries of the study.

CPU: the CUB file compiles (one build) and its SASS holds step 2's formula; the Triton module imports
without a GPU; the entries, the stream floor and the figures' lines. GPU: both peers on the inputs that
the steps are tested on (odd lengths, misaligned views, strided inputs, a set of alphas, errors).
"""

import math

import pytest
import torch
import torch.nn.functional as F

from elu_study.core import entries as study
from elu_study.core import derived, harness
from elu_study.core.check import ATOL, RTOL


def test_peers_are_entries_of_the_main_study():
    names = [e.name for e in study.study_entries()]
    for n in ("triton", "cub_transform", "F.elu_", "read_only", "write_only"):
        assert n in names
    assert study.ENTRIES["triton"].kind == study.ENTRIES["cub_transform"].kind == "peer"
    assert "peer" in study.KINDS
    assert study.ENTRIES["cub_transform"].variant == "peers/cub_transform"
    assert study.ENTRIES["triton"].checked and study.ENTRIES["cub_transform"].checked and study.ENTRIES["F.elu_"].checked
    assert not study.ENTRIES["read_only"].checked and not study.ENTRIES["write_only"].checked
    assert ("peers/cub_transform", ()) in study.builds()


def _row(name, kind, ms):
    return {"name": name, "kind": kind, "what": name, "check": None,
            "timing": {"median_ms": ms, "p10_ms": ms * 0.99, "p90_ms": ms * 1.01, "samples_ms": [[ms]], "runs": 1}}


def _record(with_streams=True):
    rows = [_row("copy_", "baseline", 3.0), _row("F.elu", "baseline", 3.01), _row("2_float4", "step", 3.02),
            _row("triton", "peer", 3.05), _row("cub_transform", "peer", 3.4)]
    if with_streams:
        rows += [_row("read_only", "baseline", 1.49), _row("write_only", "baseline", 1.39)]
    rec = {"problem": {"numel": 4096 * 393216, "shape": [4096, 393216]}, "peak_bytes_per_s": 4.8e12, "rows": rows,
           "provenance": {"gpu": "NVIDIA H200"}}
    return derived.annotate(rec)


def test_measured_stream_floor_is_the_sum_of_the_halves():
    rec = _record()
    assert math.isclose(rec["stream_floor_ms"], 1.49 + 1.39)
    assert "stream_floor_ms" not in _record(with_streams=False)  # a record from before the stream halves


def test_figures_draw_the_stream_floor_beside_the_datasheet_floor_and_the_roof():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from elu_study.jobs.study import figures as plots
    from elu_study.jobs.study.report import caption, frame

    rec = _record()
    fig = plots.xcopy_figure(rec, names=["copy_", "F.elu", "2_float4", "triton", "cub_transform"])
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any(lbl.startswith("measured floor") for lbl in labels), labels
    assert any("copy_" in lbl for lbl in labels) and "peer (Triton, CUB)" in labels
    assert any("datasheet" in lbl for lbl in labels)
    plt.close(fig)
    table = frame(rec)
    assert {"triton", "cub_transform", "read_only"} <= set(table.index)
    assert "measured stream floor 2.88 ms" in caption({**rec, "floor_ms": 1.0, "peak_source": "x", "method": {},
                                                      "provenance": {"gpu": "g", "sm_count": 1, "driver": "d",
                                                                     "cuda_runtime": "c", "torch": "t",
                                                                     "nvcc": "n", "date_utc": "2026-01-01"}})


def test_triton_module_imports_without_a_gpu():
    from elu_study.core import triton_elu

    assert len(triton_elu.CONFIGS) == 8
    assert {c.kwargs["BLOCK_SIZE"] for c in triton_elu.CONFIGS} == {1024, 2048, 4096, 8192}
    assert {c.num_warps for c in triton_elu.CONFIGS} == {4, 8}
    assert triton_elu.size_class(1024) == 11 and triton_elu.size_class(2047) == 11 and triton_elu.size_class(2048) == 12
    with pytest.raises(ValueError, match="CUDA tensor"):
        triton_elu.elu(torch.ones(4))


def test_importing_elu_study_does_not_import_triton_elu():
    import subprocess
    import sys

    code = ("import sys, elu_study, elu_study.core.harness, elu_study.jobs.sizes; "
            "print('elu_study.core.triton_elu' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


def test_cub_transform_compiles_and_runs_step_2s_formula():
    from elu_study import compile_variant
    from elu_study.core.build import built_library
    from elu_study.core.sass import resource_usage, sass_by_function

    module = compile_variant("peers/cub_transform")
    library = built_library(module)
    sass = sass_by_function(library)
    kernels = [name for name in sass if "transform_kernel" in name and "EluExpf" in name]
    assert len(kernels) == 1, list(sass)
    ops = sass[kernels[0]]
    assert "MUFU.EX2" in ops
    assert any(op.startswith("FFMA") and ".RM" in op for op in ops), "expf's range reduction: step 2's formula"
    assert not any(".FTZ" in op for op in ops)  # no fast math
    assert resource_usage(library)[kernels[0]]["local"] == 0  # no spills


# -- on a GPU ------------------------------------------------------------------------------------

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: runs the peers")


@pytest.fixture(scope="module", params=["triton", "cub_transform"])
def peer(request):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    if request.param == "triton":
        from elu_study.core import triton_elu

        return triton_elu.elu
    from elu_study import compile_variant

    return compile_variant("peers/cub_transform").elu


def randn(n, seed=0, scale=4.0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(n, device="cuda", generator=g) * scale


def assert_elu(y, x, alpha):
    assert not torch.isnan(y).any(), "unwritten (NaN-poisoned) elements remain"
    torch.testing.assert_close(y, F.elu(x, alpha), atol=ATOL, rtol=RTOL)


@gpu
@pytest.mark.parametrize("n", [1, 3, 4, 5, 1023, 4097, 2**20 + 3, 10**6])
def test_odd_lengths(peer, n):
    x = randn(n, seed=n)
    out = torch.full_like(x, float("nan"))
    assert_elu(peer(x, 1.0, out=out), x, 1.0)


@gpu
@pytest.mark.parametrize("offset", [1, 2, 3])
def test_misaligned_views(peer, offset):
    base = randn(2**16 + 7)
    x = base[offset:]
    assert x.data_ptr() % 16 != 0
    assert_elu(peer(x, 1.0), x, 1.0)
    out = torch.full_like(base, float("nan"))[offset:]
    assert_elu(peer(x, 1.0, out=out), x, 1.0)


@gpu
def test_non_contiguous_input(peer):
    x = randn(1024 * 515).view(1024, 515).t()[:, ::3]
    assert not x.is_contiguous()
    y = peer(x, 0.7)
    assert y.shape == x.shape
    assert_elu(y, x, 0.7)


@gpu
@pytest.mark.parametrize("alpha", [1.0, 0.5, 2.5, 1e-3, -1.0, 0.0, 1.7, 10.0])
def test_runtime_alpha(peer, alpha):
    x = randn(10_003, seed=7)
    assert_elu(peer(x, alpha), x, alpha)


@gpu
def test_special_values_and_in_place(peer):
    x = torch.tensor([float("nan"), float("-inf"), float("inf"), -0.0, 0.0, -1e-30, 1e-30, -88.0, 30.0], device="cuda")
    y = peer(x, 0.5)
    assert torch.isnan(y[0]) and y[1].item() == -0.5 and y[2].item() == float("inf")
    torch.testing.assert_close(y[3:], F.elu(x[3:], 0.5), atol=ATOL, rtol=RTOL)
    x = randn(4097, seed=3)
    ref = F.elu(x, 1.0)
    y = peer(x, 1.0, out=x)
    assert y.data_ptr() == x.data_ptr()
    torch.testing.assert_close(x, ref, atol=ATOL, rtol=RTOL)


@gpu
def test_cub_is_bit_identical_to_step_2():
    from elu_study import compile_variant

    x = randn(2**20 + 3, seed=11)
    cub = compile_variant("peers/cub_transform").elu(x, 1.3)
    step2 = compile_variant("2_float4").elu(x, 1.3)
    assert torch.equal(cub, step2)


@gpu
def test_wrong_inputs_raise(peer):
    with pytest.raises(ValueError):
        peer(torch.ones(8), 1.0)
    with pytest.raises(TypeError):
        peer(torch.ones(8, device="cuda", dtype=torch.float64), 1.0)
    with pytest.raises(ValueError):
        peer(torch.ones(8, device="cuda"), 1.0, out=torch.empty(9, device="cuda"))


@gpu
def test_entries_check_and_time_on_a_small_tensor():
    x = randn(4096 * 3 + 1, seed=5)
    y = torch.empty_like(x)
    for name in ("triton", "cub_transform", "F.elu_"):
        entry = study.ENTRIES[name]
        out = torch.full_like(x, float("nan"))
        assert_elu(harness.elu_fn(entry)(x, 1.0, out), x, 1.0)
        before = x.clone()
        harness.timed_call(entry, x, y)()
        torch.cuda.synchronize()
        assert torch.equal(x, before), f"{name}'s timed call modified the shared input"
    for name in ("read_only", "write_only"):
        harness.timed_call(study.ENTRIES[name], x, y)()
    torch.cuda.synchronize()
    assert torch.count_nonzero(y).item() == 0  # write_only zeroed y
