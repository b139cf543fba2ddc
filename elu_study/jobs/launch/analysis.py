"""The sweep's plan (its cells, their occupancy) and the numbers the record keeps beside its timings: x copy_, the
noise, the best cell."""

from dataclasses import dataclass

from elu_study.core.timing import noise_ms

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


@dataclass(frozen=True)
class Cell:
    """One launch shape, fields in set_launch_shape's order: blocks_per_sm 0 is a one-shot grid, > 0 a grid-stride loop."""

    threads: int
    vectors: int = 1
    hints: bool = False
    blocks_per_sm: int = 0

    @property
    def grid_stride(self) -> bool:
        return self.blocks_per_sm > 0

    @property
    def name(self) -> str:
        one_shot = f"{self.threads}x{self.vectors}" + ("+hints" if self.hints else "")
        return f"gs {self.blocks_per_sm}x{self.threads}" if self.grid_stride else one_shot

    def instance(self) -> tuple[int, int, bool, bool]:  # the template instance, as module.launch_shapes() lists it
        return self.threads, self.vectors, self.hints, self.grid_stride

    def kernel_pattern(self) -> str:  # a substring of the instance's mangled kernel name
        one_shot = f"elu_one_shot_kernelILi{self.threads}ELi{self.vectors}ELb{int(self.hints)}E"
        return f"elu_grid_stride_kernelILi{self.threads}E" if self.grid_stride else one_shot


def plan() -> list[Cell]:
    """Every cell of the sweep: the 40 one-shot shapes, then the grid-stride ones that one SM can hold."""
    one_shot = [Cell(t, v, h) for h in HINTS for t in THREADS for v in VECTORS]
    grid = [Cell(t, 1, False, b) for t in GRID_THREADS for b in BLOCKS_PER_SM if b * t <= MAX_THREADS_PER_SM]
    return one_shot + grid


def occupancy(cell: Cell, registers: int) -> dict:
    """Resident blocks and threads per SM (thread, block and register limits; no shared memory), and the load bytes
    they can have in flight at once (all of a thread's loads before any store; grid-stride: one float4 each)."""
    regs_per_warp = -(-registers * 32 // REGISTER_UNIT) * REGISTER_UNIT
    by_regs = (REGISTERS_PER_SM // regs_per_warp) // -(-cell.threads // 32) if registers else MAX_BLOCKS_PER_SM
    blocks = min(MAX_BLOCKS_PER_SM, MAX_THREADS_PER_SM // cell.threads, by_regs,
                 cell.blocks_per_sm or MAX_BLOCKS_PER_SM)
    threads = blocks * cell.threads
    return {"registers": registers, "resident_blocks_per_sm": blocks, "resident_threads_per_sm": threads,
            "load_bytes_in_flight_per_sm": threads * cell.vectors * 16}


def annotate(record: dict) -> dict:
    """x copy_ and noise of every cell and reference, and the fastest correct cell with those within noise of it."""
    roof = record["roof_ms"] = record["references"]["copy_"]["timing"]["median_ms"]
    for entry in (*record["references"].values(), *record["cells"]):
        entry["x_copy"], entry["noise_ms"] = entry["timing"]["median_ms"] / roof, noise_ms(entry["timing"])
    first, *_ = ranked = sorted((c for c in record["cells"] if c["correct"]), key=lambda c: c["timing"]["median_ms"])
    ms = lambda c: c["timing"]["median_ms"] - first["timing"]["median_ms"]
    record["best"] = {"name": first["name"], "tied": [c["name"] for c in ranked
                                                      if ms(c) <= max(first["noise_ms"], c["noise_ms"])]}
    return record
