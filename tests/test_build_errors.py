"""A user's kernel file that is wrong fails while it builds, naming the problem, the file and its line."""

from pathlib import Path

import pytest

from elu_study.core import build

STEP2 = (build.KERNELS_DIR / "2_float4.cu").read_text()


@pytest.fixture()
def extensions(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    return tmp_path


def test_a_misspelled_launch_function_fails_at_link_time_with_its_prototype(extensions):
    mine = extensions / "typo.cu"
    mine.write_text(STEP2.replace("void launch_elu(", "void launch_elux("))
    with pytest.raises(build.BuildError, match=r"typo\.cu does not define void launch_elu\(float const\*, float\*, "
                                               r"long, float, CUstream_st\*\)"):
        build.compile_variant(mine)


def test_a_syntax_error_names_the_user_s_file_and_line(extensions):
    mine = extensions / "syntax.cu"
    mine.write_text('#include "common/elu.cuh"\n\nvoid launch_elu(const float* x, float* y, int64_t n, float alpha,\n'
                    "                cudaStream_t stream) {\n  int a = ;\n}\n")
    with pytest.raises(build.BuildError) as err:
        build.compile_variant(mine)
    assert f"{mine}(5): error" in str(err.value) and "nvcc" not in str(err.value)


def test_flags_given_as_a_string_and_unknown_binding_flags_are_refused():
    with pytest.raises(TypeError, match=r"extra_cuda_cflags must be a list of flags, e\.g\. \['-DMY_THREADS=128'\]"):
        build.compile_variant("2_float4", extra_cuda_cflags="-DMY_THREADS=128")
    with pytest.raises(ValueError, match="extra_cflags takes -DELU_OP_NAMESPACE=<ns> and -DELU_DELEGATE16=<ns> only"):
        build.compile_variant("2_float4", extra_cflags=["-O3"])
    with pytest.raises(TypeError, match=r"e\.g\. \['-DMY_THREADS=128', '-O2'\], not a string"):  # split as a shell would
        build.compile_variant("2_float4", extra_cuda_cflags="-DMY_THREADS=128 -O2")
    with pytest.raises(TypeError, match=r"extra_cuda_cflags must hold strings \(one flag each\), got \[128\]"):
        build.compile_variant("2_float4", extra_cuda_cflags=["-DMY_THREADS", 128])


def test_two_errors_on_one_line_each_keep_their_source_line():
    """nvcc prints each error with the source line and a caret under it; two errors on the same line share that
    source line, and each is shown with it (the log's line repeated is not a line to drop)."""
    log = ("mine.cu(5): error: expected an expression\n  int a = ;\n          ^\n"
           "mine.cu(5): error: expected a \";\"\n  int a = ;\n           ^\n")
    spec = build.BuildSpec(Path("/tmp/mine.cu"), (), ())
    shown = build.explain(spec, log).splitlines()
    assert shown[1:] == log.splitlines()


@pytest.mark.parametrize("name", ["my_elu.cpp", "kernels/common/elu.cuh", "/tmp/mine.py"])
def test_a_file_that_is_not_a_cu_file_is_named_as_such(name):
    with pytest.raises(ValueError, match=rf"{name}: compile_variant builds a CUDA file ending in \.cu that defines "
                                         rf"launch_elu \(examples/my_elu\.cu is a template\), not a \.\w+ file"):
        build.compile_variant(name)


def test_a_second_build_compiles_its_kernel_only(extensions):
    """The binding is built once; each build's load_inline gets no torch header and no host code of its own."""
    args = build.load_arguments(build.build_spec("2_float4"))
    assert args["no_implicit_headers"] and args["cpp_sources"] == "" and not args["is_python_module"]
    assert all("torch" not in src.split("\n", 2)[1] for src in args["cuda_sources"])
    unique = [f"-DELU_TEST_DIR={abs(hash(str(extensions)))}"]  # builds of their own, in this extensions folder
    one, two = (build.compile_variant(v, extra_cuda_cflags=unique) for v in ("2_float4", "1_naive"))
    assert one.op_namespace != two.op_namespace and callable(one.call_elu) and callable(two.elu_backward)
    for module in (one, two):  # the build's own host source is empty: the binding it registered with is shared
        assert (Path(module.__file__).parent / "main.cpp").read_text() == ""
    assert build.binding.cache_info().currsize == 1
