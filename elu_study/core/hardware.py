"""The problem's byte count, the datasheet floor of known GPUs, and the provenance of a run."""

import datetime as dt
import os
import platform
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import torch

from elu_study.core.build import configure_toolchain
from elu_study.core.timing import NvmlSampler

SHAPE = (4096, 393216)  # the original task's input


def bytes_moved(numel: int) -> int:
    """The least a float32 elementwise op can move: each input read once, each output written once (4 bytes each)."""
    return 2 * numel * 4


@dataclass(frozen=True)
class GpuSpec:
    label: str
    peak_bytes_per_s: float  # vendor datasheet memory bandwidth
    source: str = "datasheet"


# Most specific first: "H100 NVL" and "H100 PCIe" must not match the SXM row (named "NVIDIA H100 80GB HBM3").
KNOWN_GPUS: tuple[tuple[str, GpuSpec], ...] = (
    (r"GH200", GpuSpec("GH200 (HBM3)", 4.0e12)),
    (r"H200", GpuSpec("H200 (SXM/NVL)", 4.8e12)),
    (r"H100 NVL", GpuSpec("H100 NVL", 3.9e12)),
    (r"H100 PCIe", GpuSpec("H100 PCIe", 2.0e12)),
    (r"H100", GpuSpec("H100 SXM", 3.35e12)),
    (r"B200", GpuSpec("B200", 8.0e12)),
    (r"A100.*80GB.*PCIe|A100 80GB PCIe", GpuSpec("A100 80GB PCIe", 1.935e12)),
    (r"A100.*80GB", GpuSpec("A100 80GB SXM", 2.039e12)),
    (r"A100", GpuSpec("A100 40GB", 1.555e12)),
    (r"L40S", GpuSpec("L40S", 0.864e12)),
    (r"RTX 4090", GpuSpec("RTX 4090", 1.008e12)),
    (r"A10\b", GpuSpec("A10", 0.6e12)),
    (r"L4\b", GpuSpec("L4", 0.3e12)),
    (r"T4\b", GpuSpec("T4", 0.32e12)),
    (r"V100", GpuSpec("V100 (SXM2 32GB)", 0.9e12)),
)
PEAK_OVERRIDE_ENV = "ELU_STUDY_PEAK_TBPS"


def gpu_spec(device_name: str) -> GpuSpec | None:
    """The datasheet bandwidth for a device name, or None if unknown; ELU_STUDY_PEAK_TBPS (e.g. 1.0) overrides it."""
    override = os.environ.get(PEAK_OVERRIDE_ENV)
    if override:
        return GpuSpec(device_name, float(override) * 1e12, source=f"${PEAK_OVERRIDE_ENV}")
    return next((spec for pattern, spec in KNOWN_GPUS if re.search(pattern, device_name)), None)


def floor_ms(numel: int, peak_bytes_per_s: float) -> float:
    """Time to move the bytes at datasheet bandwidth: no kernel can beat it."""
    return bytes_moved(numel) / peak_bytes_per_s * 1e3


def tbps(numel: int, ms: float) -> float:
    return bytes_moved(numel) / (ms * 1e-3) / 1e12


def _command_output(*cmd: str) -> str | None:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def nvcc_version() -> str | None:
    configure_toolchain()
    nvcc = os.path.join(os.environ["CUDA_HOME"], "bin", "nvcc") if os.environ.get("CUDA_HOME") else "nvcc"
    match = re.search(r"release (\S+), V(\S+)", _command_output(nvcc, "--version") or "")
    return match.group(2) if match else None


def provenance() -> dict:
    """Where and with what a measurement was made; recorded beside every result."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    try:
        import triton  # noqa: PLC0415 - lazy: triton is optional

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    driver = _command_output("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader")
    return {
        "gpu": props.name,
        "sm_count": props.multi_processor_count,
        "l2_cache_mib": round(getattr(props, "L2_cache_size", 0) / 2**20, 1),
        "memory_gib": round(props.total_memory / 2**30, 1),
        "compute_capability": f"{props.major}.{props.minor}",
        "driver": driver.splitlines()[0] if driver else None,
        "cuda_runtime": torch.version.cuda,
        "torch": torch.__version__,
        "triton": triton_version,
        "nvcc": nvcc_version(),
        "python": platform.python_version(),
        "date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "commit": code_commit(),
        "power_limit_w": NvmlSampler().query("nvmlDeviceGetEnforcedPowerLimit", 1e3),  # mW; read, never set
    }


def code_commit() -> str | None:
    """The commit of the tree a record was measured on (``-dirty`` with uncommitted changes; $ELU_STUDY_COMMIT where
    set, on a machine without the repository's history), as information: its fingerprint makes a record due."""
    if os.environ.get("ELU_STUDY_COMMIT"):
        return os.environ["ELU_STUDY_COMMIT"]
    root = Path(__file__).resolve().parents[2]
    return _command_output("git", "-C", str(root), "describe", "--always", "--dirty", "--abbrev=7")


# Issue-bound, in every notebook alike: issuing its warp instructions takes at least this share (%) of run time.
ISSUE_BOUND_PCT = 90
ISSUE_BOUND_RULE = (f"**Issue-bound**: issuing a kernel's warp instructions, at 4 per SM "
                    f"per cycle (ncu), takes at least {ISSUE_BOUND_PCT} % of its run time (as shown, rounded).")


def issue_bound(pct: float | None) -> bool | None:
    """Whether an issue-active share (%) is issue-bound by ISSUE_BOUND_RULE; None where it was not measured."""
    return None if pct is None else round(pct) >= ISSUE_BOUND_PCT

