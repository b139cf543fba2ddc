"""Your own kernel: the template (examples/my_elu.cu) and the contract it and compile_variant's docstring state,
and the helpers that check and time a build as the study does (elu_study.check_variant, time_variant)."""

import functools
import re
import types
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import elu_study
from elu_study.core import build, check, record, variant
from elu_study.core.exhaustive import REQUIRED_ALPHAS
from elu_study.core.hardware import tbps
from elu_study.core.ops import NOT_OPS, registered_ops
from elu_study.core.sass import inspect_variant
from elu_study.core.timing import summarize

TEMPLATE = Path(__file__).resolve().parent.parent / "examples" / "my_elu.cu"


def on_gpu(test):
    return pytest.mark.gpu(pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")(test))


def prototype(text: str) -> str:
    """The launch_elu prototype a text states, whitespace and comment marks collapsed."""
    found = re.search(r"void launch_elu\([^)]*\);", re.sub(r"\s*(//)?\s+", " ", text))
    assert found, "no launch_elu prototype"
    return found.group()


@pytest.fixture(scope="module")
def template():
    return build.compile_variant(TEMPLATE)


def test_the_template_compiles_without_a_gpu_into_one_float4_kernel(template):
    assert template.spec.source_path == TEMPLATE and template.spec.label == "my_elu"
    report = inspect_variant(template)  # its own kernel; tails and misaligned pointers go to the shared one
    assert report.function == "_Z13my_elu_kernelPK6float4PS_lf", report.summary()
    assert report.access_bits == {128} and report.local_bytes == 0 and report.stack_bytes == 0
    assert "expm1f" in report.exponential  # PyTorch's formula: no cancellation near 0


def test_the_prototype_the_template_and_the_docstring_state_is_the_header_s():
    header = prototype((build.COMMON_DIR / "elu.cuh").read_text())
    assert prototype(TEMPLATE.read_text()) == header
    assert prototype(build.compile_variant.__doc__) == header


def test_the_docstring_names_every_function_of_a_build_and_the_two_helpers(template):
    doc = re.sub(r"\s+", " ", build.compile_variant.__doc__)
    names = set(registered_ops(template)) | NOT_OPS  # NOT_OPS: the launch-shape ones too
    assert {n for n in names if f"``{n}" not in doc} == set()
    described = doc.split("The module: ")[1].split("elu_study.check_variant")[0]
    assert set(re.findall(r"``(\w+)", described)) - {"torch", "elu_"} <= names  # and no function it lacks
    helpers = re.findall(r"elu_study\.(\w+)\(", doc)
    assert set(helpers) == {"check_variant", "time_variant"} and set(helpers) <= set(elu_study.__all__)


def test_the_helpers_are_exported_lazily():
    assert {"check_variant", "time_variant"} <= set(elu_study.__all__)
    assert elu_study.check_variant is variant.check_variant and elu_study.time_variant is variant.time_variant


@pytest.mark.parametrize("call, error, says", [
    (lambda: variant.check_variant(42), TypeError, "takes a module from compile_variant or the path of a .cu file, got int"),
    (lambda: variant.check_variant("/nonexistent/mine.cu"), FileNotFoundError, "no kernel file at"),
    (lambda: variant.time_variant("mine.cpp"), ValueError, r"ending in \.cu .* not a \.cpp file"),
    (lambda: variant.check_variant(TEMPLATE, alphas=[1.0, float("nan")]), ValueError, "alpha must be a finite real"),
    (lambda: variant.check_variant(TEMPLATE, alphas=[True]), ValueError, "alpha must be a finite real"),
    (lambda: variant.check_variant(TEMPLATE, trials=0), ValueError, "trials must be positive integers"),
    (lambda: variant.check_variant(TEMPLATE, shape=(0, 4)), ValueError, "shape must be positive integers"),
    (lambda: variant.check_variant(TEMPLATE, lengths=[]), ValueError, "lengths must be positive integers"),
    (lambda: variant.time_variant(TEMPLATE, rounds=0), ValueError, "rounds must be positive integers"),
    (lambda: variant.time_variant(TEMPLATE, against=["copy_"]), ValueError, r"against takes .*F\.elu.*got \['copy_'\]"),
    (lambda: variant.time_variant(TEMPLATE, against="F.elu bfloat16"), ValueError, "against takes"),
    (lambda: variant.time_variant(TEMPLATE, alpha=float("inf")), ValueError, "alpha must be a finite real"),
])
def test_wrong_arguments_are_named_before_anything_runs(monkeypatch, call, error, says):
    monkeypatch.setattr(variant, "compile_variant", lambda *a, **k: pytest.fail("compiled despite a wrong argument"))
    with pytest.raises(error, match=says):
        call()


@pytest.mark.skipif(torch.cuda.is_available(), reason="the error a machine without a GPU gives")
@pytest.mark.parametrize("helper", [variant.check_variant, variant.time_variant])
def test_without_a_gpu_they_say_a_cuda_gpu_is_needed_before_compiling(monkeypatch, helper):
    monkeypatch.setattr(variant, "compile_variant", lambda *a, **k: pytest.fail("compiled without a GPU to run it"))
    with pytest.raises(RuntimeError, match=rf"{helper.__name__} runs the build's kernel, so it needs a CUDA GPU"):
        helper(TEMPLATE)


def binding_like(formula, name):
    """A module whose elu(x, alpha, out=) computes ``formula`` on the CPU, as the binding hands out results."""
    def elu(x, alpha=1.0, out=None):
        y = formula(x.contiguous(), alpha)
        return y if out is None else out.copy_(y)

    return types.SimpleNamespace(__name__=name, elu=elu)


@pytest.fixture()
def on_the_cpu(monkeypatch):
    """check_variant's own code on the CPU: the study's check_elu with CPU tensors, the GPU check passed."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(variant, "check_elu", functools.partial(check.check_elu, device="cpu"))


SMALL = {"shape": (8, 1000), "lengths": (1, 3, 5, 4097)}


def test_a_correct_build_passes_every_check_at_every_alpha_with_its_worst_ulp(on_the_cpu, capsys):
    verdict = variant.check_variant(binding_like(F.elu, "cpu_elu"), **SMALL)
    layouts = variant.layouts(binding_like(F.elu, "cpu_elu"))
    assert verdict.passed and verdict.checks == len(REQUIRED_ALPHAS) * (1 + len(SMALL["lengths"]) * len(layouts))
    assert {"in place", "strided", "in place, misaligned by 4 bytes"} <= set(layouts)
    assert {f"misaligned by {4 * k} bytes" for k in variant.OFFSETS} <= set(layouts)
    assert 0 < verdict.worst_ulp <= 2  # F.elu: expm1, then alpha's rounding
    line = capsys.readouterr().out
    assert line.startswith(f"cpu_elu: PASSED {verdict.checks} checks") and f"{verdict.worst_ulp:.2f} ulp" in line


def test_an_unwritten_tail_fails_naming_each_case(on_the_cpu, capsys):
    def all_but_the_last(x, alpha):
        y = F.elu(x, alpha)
        y.view(-1)[-1] = float("nan")  # what a kernel without a tail path leaves in a poisoned output
        return y

    verdict = variant.check_variant(binding_like(all_but_the_last, "no_tail"), alphas=[0.5], **SMALL)
    assert not verdict.passed and len(verdict.failed) == verdict.checks and verdict.worst_ulp == float("inf")
    assert "alpha=0.5, shape (8, 1000), out=: outputs left unwritten: 3" in verdict.failed  # one per trial
    assert "alpha=0.5, n=5, misaligned by 8 bytes: outputs left unwritten: 1" in verdict.failed
    out = capsys.readouterr().out
    assert out.startswith(f"no_tail: FAILED {verdict.checks} of {verdict.checks} checks")
    assert f"... and {verdict.checks - variant.SHOWN_FAILURES} more" in out


def test_expf_minus_one_passes_the_tolerance_and_shows_its_cancellation_in_ulp(on_the_cpu):
    expf = binding_like(lambda x, a: torch.where(x > 0, x, a * (torch.exp(x) - 1)), "expf")
    verdict = variant.check_variant(expf, alphas=[1.0], **SMALL)
    assert verdict.passed and verdict.worst_ulp > 100  # near 0, expf(x) - 1 keeps few of its digits


def timing(median_ms: float, clocks=None) -> dict:
    rounds = [[median_ms * f for f in (0.99, 1.0, 1.0, 1.01)], [median_ms * f for f in (0.98, 1.02, 1.02, 1.02)]]
    nvml = [{"samples": 3, "sm_clock_mhz": c} for c in clocks] if clocks else [{"samples": 0, "error": "no NVML"}] * 2
    return {**summarize(rounds), "nvml": nvml}


def test_the_timing_line_from_a_given_result():
    numel = 4096 * 393216
    clocks = [{"min": 1700.0, "median": 1980.0, "max": 1980.0}, {"min": 1755.0, "median": 1960.0, "max": 1990.0}]
    timings = {"copy_": timing(2.0), "mine": timing(3.0, clocks)}
    line = variant.timing_line("mine", timings, numel)
    t = timings["mine"]
    spread = 100 * (max(t["round_medians_ms"]) - min(t["round_medians_ms"])) / t["median_ms"]
    assert line == (f"mine: {t['median_ms']:.3f} ms, {t['median_ms'] / timings['copy_']['median_ms']:.3f} x copy_ "
                    f"({timings['copy_']['median_ms']:.3f} ms), {tbps(numel, t['median_ms']):.2f} TB/s; spread of 2 "
                    f"round medians {spread:.1f} % (8 runs); SM clock 1970 MHz (1700-1990)")
    timings["mine"] = timing(3.0)
    assert "SM clock" not in variant.timing_line("mine", timings, numel)  # where NVML read nothing


def test_time_variant_times_the_study_s_copy_and_the_build_interleaved(monkeypatch, capsys):
    """The study's calls (its copy_ entry, the build's elu into out=) on its input, through time_interleaved."""
    x = torch.randn(4, 1000)
    seen = {}

    def interleaved(calls, rounds):
        seen.update(calls=calls, rounds=rounds)
        return {name: timing(1.0 + i) for i, name in enumerate(calls)}

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(variant, "time_interleaved", interleaved)
    monkeypatch.setattr(variant, "input_tensor", lambda shape: x if shape == (4, 1000) else pytest.fail(shape))
    timings = variant.time_variant(binding_like(F.elu, "cpu_elu"), shape=(4, 1000), alpha=0.5, rounds=3)
    assert list(seen["calls"]) == ["copy_", "F.elu", "cpu_elu"] and seen["rounds"] == 3  # F.elu in the same rounds
    assert torch.equal(seen["calls"]["F.elu"](), F.elu(x))  # as the study times it: alpha 1, allocating
    y = seen["calls"]["copy_"]()
    assert torch.equal(y, x) and y is not x  # y.copy_(x), as the study's copy_ entry calls it
    assert torch.equal(seen["calls"]["cpu_elu"](), F.elu(x, 0.5)) and torch.equal(y, F.elu(x, 0.5))  # into the same y
    assert capsys.readouterr().out == "".join(variant.timing_line(n, timings, x.numel()) + "\n"
                                             for n in ("cpu_elu", "F.elu"))


# -- on a GPU ------------------------------------------------------------------------------------------------------
def mutated(tmp_path, old: str, new: str, name: str):
    text = TEMPLATE.read_text()
    assert old in text
    path = tmp_path / f"{name}.cu"
    path.write_text(text.replace(old, new))
    return build.compile_variant(path)


@on_gpu
def test_the_template_passes_the_study_s_check_on_a_gpu(template):
    verdict = variant.check_variant(template)
    assert verdict.passed, str(verdict)
    # Its formula is F.elu's (alpha * expm1f): within F.elu's worst ulp over every float32 input at the accuracy
    # record's alphas, plus alpha's own rounding to float32, which the exact ELU of the Python alpha charges to it
    # (on the H200: 2.56 ulp at alpha = 1.3, against 2.13 + 0.62).
    accuracy = record.load(job="accuracy")
    expm1f = max(max(v["ulp"] for v in run["formulas"]["F.elu"]["max_ulp"].values())
                 for run in accuracy["runs"].values())
    rounding = max(abs(float(np.float32(a)) - a) / abs(a) for a in REQUIRED_ALPHAS if a) * 2**24
    assert verdict.worst_ulp <= expm1f + rounding, str(verdict)


@on_gpu
def test_a_template_without_its_tail_fails_the_check_on_a_gpu(tmp_path):
    no_tail = mutated(tmp_path, "if (!elu::vector_path_or_fallback<MyElu>(x, y, n, alpha, stream)) return;",
                      "if (!elu::aligned16(x, y)) return elu::launch_scalar<MyElu>(x, y, n, alpha, stream);\n"
                      "  if (n < 4) return;  // and no tail: the last n % 4 elements stay unwritten", "no_tail")
    verdict = variant.check_variant(no_tail, shape=(1024, 4097), alphas=[1.0])
    assert not verdict.passed
    assert "alpha=1, n=5, out=: outputs left unwritten: 1" in verdict.failed
    assert not any("misaligned" in f for f in verdict.failed)  # the scalar path still takes every element there


@on_gpu
def test_time_variant_prints_one_line_against_copy_on_a_gpu(template, capsys):
    timings = variant.time_variant(template, against=(), rounds=2)
    line = capsys.readouterr().out.strip()
    assert line == variant.timing_line("my_elu", timings, 4096 * 393216) and "\n" not in line
    assert 0.8 < timings["my_elu"]["median_ms"] / timings["copy_"]["median_ms"] < 1.3  # a float4 kernel: near copy_


def test_ulp_error_counts_a_stray_denormal_against_an_exact_zero_as_one_ulp():
    """alpha = 0 makes every negative input's ELU exactly 0: a kernel that returns the least denormal is 1 ulp off
    (its ulp there is 2^-149, as for every value under 2^-126), not 2^-125 of an ulp."""
    from elu_study.core.check import ulp_error

    x = torch.tensor([-1.0, -1e-30, 0.0, 1e-40, 2.0])
    exact = torch.where(x > 0, x, torch.zeros_like(x))
    tiny = torch.tensor(2.0**-149)
    assert ulp_error(exact, x, 0.0).tolist() == [0.0] * 5
    assert ulp_error(exact + torch.where(x > 0, 0.0, tiny), x, 0.0).tolist()[:3] == [1.0, 1.0, 1.0]
    assert ulp_error(torch.nextafter(exact, exact + 1), x, 0.0)[4].item() == 1.0  # 2.0's ulp: 2^-22
