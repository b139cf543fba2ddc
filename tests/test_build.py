"""Every step compiles for sm_90 on a machine with no GPU, and its SASS shows what the step claims."""

import pytest
import torch

from elu_study.core import build
from elu_study import compile_variant
from elu_study import known_variants
from elu_study.core.entries import ENTRIES, KERNELS
from elu_study.core.sass import inspect_variant, named, sass_by_function

# What each step's notebook says about it, as the compiler must show it.
CLAIMS = {name: kernel.sass for name, kernel in KERNELS.items()}  # catalog.toml's [kernels.<file>].sass


def test_every_kernel_file_has_its_catalogue_facts():
    """Each kernels/<n>_<name>.cu has a [kernels.<file>] table in catalog.toml, and each table a kernel file."""
    assert list(known_variants()) == list(KERNELS)


@pytest.mark.parametrize("name", list(CLAIMS))
def test_step_compiles_and_its_sass_shows_the_claim(name):
    claim = CLAIMS[name]
    report = inspect_variant(compile_variant(name))
    print(report.summary())
    assert report.access_bits == set(claim["bits"]), report.summary()
    assert claim["loads"] in report.loads, report.loads
    assert report.mufu_ex2 >= 1 and claim["exp"] in report.exponential, report.summary()
    if claim["exp"] == "fast __expf":
        assert report.round_down_ffma == 0 and report.fp32_ops_per_ex2 <= 4  # no accurate expf sequence left
    assert bool(report.ftz_ops) == claim["ftz"]
    assert report.local_bytes == 0 and report.stack_bytes == 0  # no spills
    assert 0 < report.registers <= 32  # leaves full occupancy possible


def test_step_6s_exponential_keeps_no_subnormal_result():
    """Below -1, step 6 takes its exponential from a flushing ex2 (kernels/common/elu.cuh, exp_ftz): one MUFU.EX2
    per element and no compare against -126, where __expf rescales its argument to keep a subnormal result that
    e - 1 rounds away. 6_poly_expf, the one change back to __expf, has that compare on each of its 4 elements."""
    def kernel(name: str) -> list[str]:  # the float32 kernel's opcodes
        return [op for op in named(sass_by_function(build.built_library(ENTRIES[name].build())), "step6_kernelIf")
                if op != "NOP"]

    default, expf = kernel("6_beyond_copy"), kernel("6_poly_expf")
    assert default.count("MUFU.EX2") == expf.count("MUFU.EX2") == 4
    assert default.count("FSETP.GEU.AND") == 0 and expf.count("FSETP.GEU.AND") == 4
    assert len(expf) - len(default) >= 2 * 4  # the scale and the square: predicated multiplies, 2 per element


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: runs both builds on every float32")
def test_step_6s_flushing_exponential_gives_expf_s_bits_on_every_float32_input():
    """Every float32 bit pattern (NaNs, infinities and subnormals among them) through step 6 and through 6_poly_expf,
    its one change back to __expf, at two alphas: the same output bits, as kernels/common/elu.cuh argues."""
    new, old = ENTRIES["6_beyond_copy"].build(), ENTRIES["6_poly_expf"].build()
    chunk = 1 << 28
    for alpha in (1.0, -0.7):
        for start in range(0, 1 << 32, chunk):
            bits = torch.arange(start, start + chunk, device="cuda", dtype=torch.int64).to(torch.int32)
            x = bits.view(torch.float32)
            assert torch.equal(new.elu(x, alpha).view(torch.int32), old.elu(x, alpha).view(torch.int32)), (alpha, start)


def test_the_float32_backward_computes_exp_on_every_lane_without_a_branch_per_element():
    """Every build's float32 backward (kernels/common/backward.cu) computes exp(x) on every lane and selects: no
    per-element branch region (BSSY) in its float4 kernel; elu_backward_branch, the one change back, has one per
    element (4). One MUFU.EX2 per element either way."""
    def kernel(name: str) -> list[str]:
        return named(sass_by_function(build.built_library(ENTRIES[name].build())), "float4_kernelINS0_9FromInput")

    default, branch = kernel("elu_backward"), kernel("elu_backward_branch")
    assert default.count("BSSY") == 0 and branch.count("BSSY") == 4
    assert default.count("MUFU.EX2") == branch.count("MUFU.EX2") == 4


def test_a_flushing_builds_backward_keeps_huge_grads_times_a_denormal_exp(monkeypatch):
    """--use_fast_math flushes a denormal exp(x) (x in [-103.97, -87.3]) to 0, and inf * 0 is NaN: the build tells the
    shared backward (nvcc defines no macro for it), which multiplies by exp(x/2) twice. Its float4 kernel: at least
    four multiplies per element (x's scale, grad by alpha, two by exp(x/2)); one by exp(x) without the flag."""
    for flags, flushes in ((["--use_fast_math"], True), (["-use_fast_math"], True), (["-ftz=true"], True),
                           (["--ftz", "true"], True), (["-ftz", "1"], True), (["--use_fast_math", "-ftz=false"], False),
                           (["-O3", "-DX=ftz"], False), ([], False)):
        assert build.flushes_denormals(flags) is flushes, flags
    monkeypatch.setenv("NVCC_APPEND_FLAGS", "--ftz=true")
    assert build.flushes_denormals([])
    monkeypatch.delenv("NVCC_APPEND_FLAGS")
    flags = {n: build.load_arguments(build.build_spec(n))["extra_cuda_cflags"] for n in ("4_fast_math", "2_float4")}
    assert "-DELU_FLUSHES_DENORMALS=1" in flags["4_fast_math"] and "-DELU_FLUSHES_DENORMALS=1" not in flags["2_float4"]
    ops = named(sass_by_function(build.built_library(ENTRIES["4_fast_math"].build())), "float4_kernelINS0_9FromInput")
    assert ops.count("FMUL.FTZ") >= 4 * 4 and ops.count("MUFU.EX2") == 4


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_flushing_builds_backward_matches_aten_where_exp_is_denormal_or_zero():
    """Step 4's backward against aten's where exp(x) is denormal, rounds to 0 or the grad overflows: x from -180 to
    -80 (every 1/64, and each side of ln(2^-150)), grads +-inf, +-3e38 and 1, alpha 1 and 2.5; NaN where aten's is."""
    edge = torch.tensor(-103.97207641601562)
    xs = torch.cat([torch.arange(-180.0, -80.0, 1 / 64), edge.view(1), torch.nextafter(edge, torch.tensor(-200.0)).view(1)])
    grads = torch.tensor([float("inf"), -float("inf"), 3e38, -3e38, 1.0])
    x, g = (t.reshape(-1).cuda() for t in torch.meshgrid(xs, grads, indexing="ij"))
    module = ENTRIES["4_fast_math"].build()
    for alpha in (1.0, 2.5):
        got, want = module.elu_backward(g, x, alpha, False), torch.ops.aten.elu_backward(g, alpha, 1, 1, False, x)
        bad = ~torch.isclose(got, want, rtol=1e-4, atol=1e-4, equal_nan=True)
        assert not bad.any(), (alpha, x[bad][:5].tolist(), g[bad][:5].tolist(), got[bad][:5].tolist(), want[bad][:5])


def test_grid_waves_flag_builds_a_separate_extension():
    default = build.build_spec("3_grid_stride")
    waves = build.build_spec("3_grid_stride", ["-DELU_GRID_WAVES=2"])
    assert default.extension_name() != waves.extension_name()
    assert waves.cuda_flags[-1] == "-DELU_GRID_WAVES=2"


def test_repeated_calls_reuse_the_build():
    assert compile_variant("2_float4") is compile_variant("2_float4")
    assert compile_variant("2") is compile_variant("float4")


def test_file_flags_directive():
    assert build.file_flags("// elu-study: nvcc-flags = --use_fast_math -Xptxas=-v\n") == ["--use_fast_math", "-Xptxas=-v"]
    assert "--use_fast_math" in build.build_spec("4_fast_math").cuda_flags
    assert "--use_fast_math" not in build.build_spec("2_float4").cuda_flags


def test_unknown_variant_lists_the_known_ones():
    with pytest.raises(ValueError) as err:
        compile_variant("9_magic")
    for name in known_variants():
        assert name in str(err.value)
    with pytest.raises(FileNotFoundError):
        compile_variant("/nonexistent/kernel.cu")


def test_header_edits_change_the_extension_name(tmp_path, monkeypatch):
    """Headers are #included, so their text must be part of the build's identity."""
    before = build.build_spec("2_float4").extension_name()
    common = tmp_path / "common"
    common.mkdir()
    for f in build.COMMON_DIR.iterdir():
        (common / f.name).write_text(f.read_text() + "\n// edited\n")
    monkeypatch.setattr(build, "COMMON_DIR", common)
    assert build.build_spec("2_float4").extension_name() != before


def test_a_built_variant_is_up_to_date_for_ninja():
    """A second load compiles nothing: every input nvcc's dependency file names exists, so ninja finds the build
    current (a name it cannot find, such as a relative #line name, is a missing input: rebuilt on every load)."""
    import subprocess  # noqa: PLC0415

    module = compile_variant("2_float4")  # first: it sets CUDA_HOME, which cpp_extension reads when imported
    from torch.utils.cpp_extension import _get_build_directory  # noqa: PLC0415

    folder = _get_build_directory(module.spec.extension_name(), verbose=False)
    explained = subprocess.run(["ninja", "-C", folder, "-n", "-d", "explain"], capture_output=True, text=True,
                               check=True)
    assert "no work to do" in explained.stdout, explained.stdout + explained.stderr
