"""The sweep's plan: which lengths and entries, and how many timed calls per point."""

from elu_study.core.entries import ENTRIES, Entry, resolve
from elu_study.core.text import fmt_bytes, fmt_n  # noqa: F401 - re-exported: how the sweep writes 2^20 and 8 KiB

MIN_EXP, MAX_EXP = 10, 31
# Lengths that are not powers of two: odd ones (the float4 kernels' scalar tail) and round decimal ones.
ODD = (4_097, 1_048_579, 33_554_433)
DECIMAL = tuple(10**k for k in range(4, 10))
BYTES_PER_ELEMENT = 8  # 4 read + 4 written: the least an elementwise float32 op moves
BASELINE_NAMES = ("F.elu", "torch.compile(F.elu)", "F.elu_", "copy_", "read_only", "write_only")
# Called as a model calls them (output allocated); swept here, not in the catalogue: the core does not import the
# PyTorch face they belong to.
MODULES = (Entry("nn.ELU", "module", "torch.nn.ELU(alpha): the module a model holds (F.elu inside)"),
           Entry("elu_study.ELU", "module", "the drop-in, elu_study.ELU(alpha): the study's default build per dtype"))
STREAMS = ("read_only", "write_only")  # shown as their sum where it bounds every row (analysis.stream_bound_from)
MODES = ("cold", "warm", "host")

# Timing budget per (entry, length); see runs().
FLUSH_BYTES = 256 * 2**20  # do_bench's L2 flush buffer
COLD_MS = WARM_MS = 10.0  # GPU time aimed at per mode, in runs of one call
MIN_RUNS, MAX_RUNS = 10, 100  # MAX_RUNS bounds the launches queued behind one sleep
HOST_GPU_MS = 10.0  # GPU work queued per host-timing loop
HOST_MIN_CALLS, HOST_MAX_CALLS = 3, 50
HOST_REPEATS = 5  # host-timing loops per point: the spread of their per-call means
MODEL_TBPS, MODEL_LAUNCH_MS = 3.5, 0.003  # for run counts only
CHECK_CHUNK = 1 << 27


def plan(max_exp: int = MAX_EXP) -> list[int]:
    """Every power of two from 2^MIN_EXP to 2^max_exp, plus the odd and decimal lengths in that range."""
    extra = {n for n in (*ODD, *DECIMAL) if 2**MIN_EXP <= n <= 2**max_exp}
    return sorted({2**k for k in range(MIN_EXP, max_exp + 1)} | extra)


def sweep_entries(names=None) -> list:
    """Every entry of kind "step" (so a step added later is swept too), the peers, the modules and the baselines."""
    modules = {e.name: e for e in MODULES}
    if names:
        return [modules.get(n) or resolve([n])[0] for n in names]
    steps = [e for e in ENTRIES.values() if e.kind == "step" and not e.mode]
    peers = [e for e in ENTRIES.values() if e.kind == "peer"]
    return [*steps, *peers, *MODULES, *(ENTRIES[n] for n in BASELINE_NAMES if n in ENTRIES)]


def runs(n: int) -> dict[str, int]:
    """Timed calls per mode at length n: enough for a spread, few at large n."""
    est = MODEL_LAUNCH_MS + BYTES_PER_ELEMENT * n / (MODEL_TBPS * 1e12) * 1e3  # the ms a call is expected to take
    clamp = lambda v, lo, hi: int(max(lo, min(hi, v)))
    return {
        "cold": clamp(COLD_MS / (est + 0.07), MIN_RUNS, MAX_RUNS),  # + the flush
        "warm": clamp(WARM_MS / est, MIN_RUNS, MAX_RUNS),
        "host_calls": clamp(HOST_GPU_MS / est, HOST_MIN_CALLS, HOST_MAX_CALLS),
    }
