"""The sweep's plan: its launch shapes (cells), the time it takes, and each cell's theoretical occupancy."""

from __future__ import annotations

from dataclasses import dataclass

VARIANT = "sweeps/launch_shapes"
THREADS = (64, 128, 256, 512, 1024)
VECTORS = (1, 2, 4, 8)
HINTS = (False, True)
GRID_THREADS = (128, 256, 512, 1024)
BLOCKS_PER_SM = (1, 2, 4, 8, 16, 32)
MAX_THREADS_PER_SM = 2048  # Hopper: 64 warps per SM
MAX_BLOCKS_PER_SM = 32
REGISTERS_PER_SM = 65536
REGISTER_UNIT = 256  # registers are allocated per warp in units of 256
ALPHA = 1.0
CALL_MS = 3.1  # one full-size call on the H200 (about copy_'s time): for the time estimate only
REFERENCES = ("copy_", "2_float4")


@dataclass(frozen=True)
class Cell:
    """One launch shape: blocks_per_sm = 0 is a one-shot grid, > 0 a grid-stride loop."""

    threads: int
    vectors: int = 1
    hints: bool = False
    blocks_per_sm: int = 0

    @property
    def grid_stride(self) -> bool:
        return self.blocks_per_sm > 0

    @property
    def name(self) -> str:
        if self.grid_stride:
            return f"gs {self.blocks_per_sm}x{self.threads}"
        return f"{self.threads}x{self.vectors}" + ("+hints" if self.hints else "")

    def args(self) -> tuple[int, int, bool, int]:
        """set_launch_shape's arguments."""
        return self.threads, self.vectors, self.hints, self.blocks_per_sm

    def instance(self) -> tuple[int, int, bool, bool]:
        """The template instance it runs, as module.launch_shapes() lists it."""
        return self.threads, self.vectors, self.hints, self.grid_stride

    def kernel_pattern(self) -> str:
        """A substring of the instance's mangled kernel name."""
        if self.grid_stride:
            return f"elu_grid_stride_kernelILi{self.threads}E"
        return f"elu_one_shot_kernelILi{self.threads}ELi{self.vectors}ELb{int(self.hints)}E"


def plan() -> list[Cell]:
    """Every cell of the sweep: the 40 one-shot shapes, then the grid-stride ones that one SM can hold."""
    one_shot = [Cell(t, v, h) for h in HINTS for t in THREADS for v in VECTORS]
    grid = [Cell(t, 1, False, b) for t in GRID_THREADS for b in BLOCKS_PER_SM if b * t <= MAX_THREADS_PER_SM]
    return one_shot + grid


def plan_order(name: str) -> int:
    """A cell's place in plan(): for sorting names as the plan lists them."""
    return [c.name for c in plan()].index(name)


def estimate_s(n_calls: int, rounds: int, warmup_ms: float, rep_ms: float, check_trials: int) -> float:
    """Rough wall time of the measurement (not the build): do_bench's estimate, warm-up and repeats per call
    and round, and the checks (a few full-size passes each)."""
    per_timing = (5 * CALL_MS + warmup_ms + rep_ms) * 1.15 / 1e3  # + L2 flushes and Python
    per_check = 0.3 * check_trials + 0.05
    return n_calls * rounds * per_timing + n_calls * per_check


# -- occupancy and bytes in flight, from the registers of each instance ----------------------------
def resident_blocks(threads: int, registers: int) -> int:
    """Blocks of one instance that one SM holds: the thread, block and register limits (no shared memory)."""
    warps = -(-threads // 32)
    regs_per_warp = -(-registers * 32 // REGISTER_UNIT) * REGISTER_UNIT
    by_regs = (REGISTERS_PER_SM // regs_per_warp) // warps if registers else MAX_BLOCKS_PER_SM
    return min(MAX_BLOCKS_PER_SM, MAX_THREADS_PER_SM // threads, by_regs)


def occupancy(cell: Cell, registers: int) -> dict:
    """Resident threads per SM, and the load bytes that they can have in flight at once (each thread issues
    all its loads before any store; a grid-stride thread, one float4 per iteration of the source loop)."""
    blocks = resident_blocks(cell.threads, registers)
    if cell.grid_stride:
        blocks = min(blocks, cell.blocks_per_sm)
    threads = blocks * cell.threads
    return {"registers": registers, "resident_blocks_per_sm": blocks, "resident_threads_per_sm": threads,
            "occupancy_pct": 100.0 * threads / MAX_THREADS_PER_SM,
            "load_bytes_in_flight_per_sm": threads * cell.vectors * 16}
