"""Your own build (a module from ``compile_variant`` or the path of a .cu file), checked and timed as the study
checks and times its steps: ``check_variant`` with core.check, ``time_variant`` with core.timing (a CUDA GPU)."""

import math
import numbers
import os
import statistics
from dataclasses import dataclass, field

import torch

from elu_study.core import text
from elu_study.core.build import compile_variant, resolve_variant
from elu_study.core.check import ATOL, CheckResult, EluFn, check_elu, max_ulp
from elu_study.core.entries import ALPHA, ENTRIES
from elu_study.core.exhaustive import REQUIRED_ALPHAS
from elu_study.core.hardware import SHAPE, tbps
from elu_study.core.harness import input_tensor, timed_call
from elu_study.core.timing import noise_ms, time_interleaved

LENGTHS = (1, 3, 4, 5, 4097, 2**20 + 3)  # odd lengths: a float4 kernel's tails, grids of one and of partial blocks
OFFSETS = (1, 2, 3)  # elements past a 16-byte boundary: every misalignment a float32 view can have
SHOWN_FAILURES = 10


@dataclass
class Verdict:
    """What ``check_variant`` found: the checks run, those that failed and why, the worst error in ulp and where."""

    name: str
    checks: int = 0
    failed: list[str] = field(default_factory=list)
    worst_ulp: float = 0.0
    worst_at: str = ""

    @property
    def passed(self) -> bool:
        return self.checks > 0 and not self.failed

    def add(self, case: str, result: CheckResult, ulp: float) -> None:
        self.checks += 1
        if not result.passed:
            self.failed.append(f"{case}: " + (f"outputs left unwritten: {result.unwritten}" if result.unwritten else
                                              f"max abs err {result.max_abs_err_vs_torch:.1e} from F.elu"))
        if ulp > self.worst_ulp or not self.worst_at:
            self.worst_ulp, self.worst_at = ulp, case

    def __str__(self) -> str:
        return text.render("variant/check.md.j2", v=self, atol=ATOL, shown=SHOWN_FAILURES)


def layouts(module) -> dict[str, EluFn]:
    """How the check calls the build, each as check_elu's ``fn(x, alpha, out) -> out``: into out, in place, on x and
    out misaligned by each of OFFSETS (in place too), and on a strided x (every other element of a wider buffer)."""
    elu = module.elu

    def shifted(t: torch.Tensor, k: int) -> torch.Tensor:  # t's values k elements into a buffer of their own
        return torch.empty(t.numel() + k, device=t.device, dtype=t.dtype)[k:].view(t.shape).copy_(t)

    def misaligned(k: int) -> EluFn:
        return lambda x, alpha, out: out.copy_(elu(shifted(x, k), alpha, out=shifted(out, k)))

    def misaligned_in_place(x, alpha, out):
        v = shifted(x, 1)
        return out.copy_(elu(v, alpha, out=v))

    return {"out=": lambda x, alpha, out: elu(x, alpha, out=out),
            "in place": lambda x, alpha, out: elu(out.copy_(x), alpha, out=out),
            **{f"misaligned by {4 * k} bytes": misaligned(k) for k in OFFSETS},
            "in place, misaligned by 4 bytes": misaligned_in_place,
            "strided": lambda x, alpha, out: elu(torch.stack([x, x], -1)[..., 0], alpha, out=out)}


def check_variant(mod_or_path, *, alphas=REQUIRED_ALPHAS, shape=SHAPE, lengths=LENGTHS, trials: int = 3) -> Verdict:
    """Check a build against F.elu as the study checks its steps, and print the verdict: at each of
    ``alphas`` (default: the issue's required ones), ``trials`` fresh inputs of the study's ``shape`` (4096 x 393216:
    about 26 GB of GPU memory; pass a smaller one where that does not fit), then one of each of ``lengths`` in each of
    ``layouts``; every output NaN-poisoned first, each result within core.check's ATOL/RTOL of F.elu and fully
    written. The verdict also holds the worst error in ulp of the exact ELU (float64), and where it was."""
    alphas, (trials,), shape, lengths = _alphas(alphas), _positive("trials", trials), _positive("shape", shape), \
        _positive("lengths", lengths)
    module, name = _build(mod_or_path, "check_variant")
    fns, verdict = layouts(module), Verdict(name)
    cases = [(f"shape {shape}, out=", shape, "out=", trials)]
    cases += [(f"n={n}, {layout}", (n,), layout, 1) for n in lengths for layout in fns]
    for alpha in alphas:
        for what, size, layout, n_trials in cases:
            ulps: list[float] = []
            case = f"alpha={alpha:g}, {what}"
            try:
                result = check_elu(_noting_ulps(fns[layout], ulps), shape=size, alpha=alpha, trials=n_trials)
            except RuntimeError as err:  # a launch that failed: which call made it
                raise RuntimeError(f"{verdict.name}, {case}: {err}") from err
            verdict.add(case, result, max(ulps, default=math.inf))
    print(verdict)
    return verdict


def _noting_ulps(fn: EluFn, ulps: list[float]) -> EluFn:
    def run(x, alpha, out):
        y = fn(x, alpha, out)
        ulps.append(max_ulp(y, x, alpha))
        return y

    return run


def time_variant(mod_or_path, *, against=("F.elu",), shape=SHAPE, alpha: float = ALPHA, rounds: int = 5) -> dict:
    """Time a build's ``elu(x, alpha, out=y)`` against ``y.copy_(x)`` as the study times its steps: on the study's
    input (randn x 4 of ``shape``, 6.4 GB each way by default), in ``rounds`` interleaved rounds of CUDA-event-timed
    runs after a warm-up (core.timing.time_interleaved), with the study's float32 entries ``against`` (e.g. "F.elu",
    "6_beyond_copy"; at the study's alpha, 1.0) in the same rounds, and print one ``timing_line`` each.
    Returns the timings, ``{"copy_": ..., **against, name: ...}``, as time_interleaved gives them."""
    (alpha,), (rounds,), shape = _alphas([alpha]), _positive("rounds", rounds), _positive("shape", shape)
    against = _against(against)
    module, name = _build(mod_or_path, "time_variant")
    x = input_tensor(shape)
    y = torch.empty_like(x)
    calls = {"copy_": timed_call(ENTRIES["copy_"], x, y), **{n: timed_call(ENTRIES[n], x, y) for n in against}}
    timings = time_interleaved({**calls, name: lambda: module.elu(x, alpha, out=y)}, rounds=rounds)
    print("\n".join(timing_line(n, timings, x.numel()) for n in (name, *against)))
    return timings


def _against(names) -> tuple[str, ...]:
    """The study's float32 forward entries that compute ELU into y (out=), by name; anything else said wrong."""
    names = (names,) if isinstance(names, str) else tuple(names)
    fit = [e.name for e in ENTRIES.values() if not e.mode and e.direction == "forward" and e.checked]
    if wrong := [n for n in names if n not in fit]:
        raise ValueError(f"against takes the study's float32 ELU entries ({', '.join(fit)}); got {wrong}")
    return names


def timing_line(name: str, timings: dict, numel: int) -> str:
    """A line of ``time_variant``'s: median, x copy_, bandwidth (float32, 8 B/element), round-median spread, SM clock."""
    t, copy = timings[name], timings["copy_"]
    clocks = [s["sm_clock_mhz"] for s in t.get("nvml", []) if s.get("samples")]
    clock = clocks and {"median": statistics.median(c["median"] for c in clocks),
                        "min": min(c["min"] for c in clocks), "max": max(c["max"] for c in clocks)}
    return text.render("variant/time.md.j2", build=name, t=t, copy=copy, x_copy=t["median_ms"] / copy["median_ms"],
                       tbps=tbps(numel, t["median_ms"]), spread=100 * noise_ms(t) / t["median_ms"], clock=clock)


def _alphas(alphas) -> list[float]:
    alphas = [alphas] if isinstance(alphas, numbers.Real) else list(alphas)
    if not alphas or any(isinstance(a, bool) or not isinstance(a, numbers.Real) or not math.isfinite(a) for a in alphas):
        raise ValueError(f"alpha must be a finite real number (alphas: a list of them), got {alphas!r}")
    return [float(a) for a in alphas]


def _positive(what: str, values) -> tuple[int, ...]:
    values = (values,) if isinstance(values, int) else tuple(values)
    if not values or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values):
        raise ValueError(f"{what} must be positive integers, got {values!r}")
    return values


def _build(mod_or_path, helper: str) -> tuple:
    """(module, its name): a module as it is, or a kernel file's path (checked first) compiled once a GPU is there."""
    is_module = callable(getattr(mod_or_path, "elu", None))
    if not is_module:
        if not isinstance(mod_or_path, (str, os.PathLike)):
            raise TypeError(f"{helper} takes a module from compile_variant or the path of a .cu file, "
                            f"got {type(mod_or_path).__name__}")
        resolve_variant(mod_or_path)
    if not torch.cuda.is_available():
        raise RuntimeError(f"{helper} runs the build's kernel, so it needs a CUDA GPU, and torch sees none here "
                           "(compile_variant needs none: it compiles without one)")
    module = mod_or_path if is_module else compile_variant(mod_or_path)
    return module, getattr(getattr(module, "spec", None), "label", None) or getattr(module, "__name__", "build")
