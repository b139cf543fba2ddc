"""Each step's full-size launch from its kernel's knobs and flags, and the bytes each thread touches (no GPU)."""

import math
import re
from dataclasses import dataclass

import numpy as np

from elu_study.core.build import resolve_variant
from elu_study.core.entries import BYTES_PER_ELEMENT, ENTRIES, KERNELS, grid_stride_blocks

WARP = 32
# What one Hopper SM holds at most (these kernels' registers and shared memory never limit residency).
MAX_THREADS_PER_SM, MAX_BLOCKS_PER_SM = 2048, 32
VECTOR_BYTES = 16
LINE_BYTES = 128  # an L2 cache line: four 32-byte sectors

ORDERS = {0: "address order", 1: "reversed", 2: "two streams", 3: "persistent runs"}


def kernel_knobs(variant: str, flags=()) -> dict[str, str]:
    """A kernel file's ``#define ELU...`` and ``constexpr int`` knobs, overridden by ``-DNAME=value`` flags."""
    text = resolve_variant(variant).read_text()
    knobs = dict(re.findall(r"^#define (ELU\w+) (\S+)", text, re.M))
    knobs.update(re.findall(r"^\s*constexpr int (\w+) = (\d+);", text, re.M))
    knobs.update(m.groups() for m in map(re.compile(r"-D(\w+)=(\S+)").fullmatch, flags) if m)
    return knobs


@dataclass(frozen=True)
class Launch:
    """One entry's full-size launch on a GPU of ``sm_count`` SMs."""
    name: str
    threads: int  # per block
    vectors: int  # accesses a thread issues before its first store (one-shot), or per pass (grid-stride)
    access_bytes: int  # bytes per access: 4 (one float) or 16 (one vector)
    blocks: int
    sm_count: int
    accesses: int  # accesses in the whole tensor, each way
    grid_stride: bool = False
    order: int = 0  # step 6's tile order (ELU6_ORDER); 3 is a persistent grid
    unroll: int = 1  # loads a grid-stride thread keeps in flight (nvcc unrolls step 3's loop by two)

    # Derived: resident blocks per SM and per GPU (a wave), accesses per tile, passes, loads in flight per thread.
    per_sm = property(lambda s: min(MAX_THREADS_PER_SM // s.threads, MAX_BLOCKS_PER_SM))
    wave_blocks = property(lambda s: s.per_sm * s.sm_count)
    waves = property(lambda s: s.blocks / s.wave_blocks)
    tile = property(lambda s: s.threads * s.vectors)
    tiles = property(lambda s: math.ceil(s.accesses / s.tile))
    passes = property(lambda s: s.accesses / (s.blocks * s.tile))
    bytes_per_thread = property(lambda s: s.vectors * s.unroll * s.access_bytes)
    resident_threads_per_sm = property(lambda s: min(s.per_sm, math.ceil(s.blocks / s.sm_count)) * s.threads)
    bytes_in_flight_per_sm = property(lambda s: s.resident_threads_per_sm * s.bytes_per_thread)


def launch(name: str, sm_count: int, numel: int) -> Launch:
    """An entry's launch at ``numel`` elements on ``sm_count`` SMs: the launcher's rules, in Python."""
    entry = ENTRIES[name]
    model = KERNELS[entry.variant].launch if entry.variant in KERNELS else None
    if model is None:
        raise ValueError(f"{name}: no launch model for {entry.variant!r} (catalog.toml's [kernels.<file>].launch: "
                         f"{', '.join(k.name for k in KERNELS.values() if k.launch)})")
    knobs = kernel_knobs(entry.variant, entry.flags)
    threads, vectors = int(knobs[model.threads]), int(knobs[model.vectors]) if model.vectors else 1
    element = BYTES_PER_ELEMENT[entry.mode]
    access = element if model.access == "element" else VECTOR_BYTES
    accesses = numel * element // access
    order, grid_stride = int(knobs.get("ELU6_ORDER", 0)), model.grid_stride
    blocks = math.ceil(accesses / (threads * vectors))  # one-shot: a block per tile
    if grid_stride:
        blocks = grid_stride_blocks(entry, sm_count, numel)
    elif order == 3:
        blocks = min(blocks, int(knobs["ELU6_BLOCKS_PER_SM"]) * sm_count)
    unroll = (1 if knobs.get("ELU_GRID_UNROLL") == "1" else 2) if grid_stride else 1
    return Launch(name, threads, vectors, access, blocks, sm_count, accesses, grid_stride, order, unroll)


def tile_of(order: int, block, tiles: int):
    """Which tile a block takes in a one-shot launch (kernels/6_beyond_copy.cu's tile_of; numpy arrays too)."""
    block = np.asarray(block)
    if order == 1:
        return tiles - 1 - block
    if order == 2:
        half = (tiles + 1) // 2
        return np.where(block & 1, half + (block >> 1), block >> 1)
    return block


def persistent_runs(lau: Launch) -> tuple[np.ndarray, np.ndarray]:
    """A persistent grid's contiguous runs of tiles: (first tile, one past the last) per block."""
    per = math.ceil(lau.tiles / lau.blocks)
    begin = np.arange(lau.blocks, dtype=np.int64) * per
    return begin, np.minimum(begin + per, lau.tiles)


def thread_accesses(lau: Launch, count: int = WARP) -> np.ndarray:
    """Byte offsets threads 0 to ``count`` of block 0 read (grid-stride: first pass), a row per thread, a column each."""
    thread = np.arange(count, dtype=np.int64)[:, None]
    tile = tile_of(lau.order, 0, lau.tiles)
    return (tile * lau.tile + thread + np.arange(lau.vectors)[None, :] * lau.threads) * lau.access_bytes


def lines_per_instruction(lau: Launch) -> int:
    """128-byte lines one warp instruction touches (lanes 0-31 of warp 0, first access)."""
    return len(np.unique(thread_accesses(lau)[:, 0] // LINE_BYTES))


def wave_sizes(lau: Launch) -> list[int]:
    """Blocks in each wave, in launch order: whole waves, then the partial one."""
    full, rest = divmod(lau.blocks, lau.wave_blocks)
    return [lau.wave_blocks] * full + ([rest] if rest else [])


def block_pass_map(lau: Launch) -> np.ndarray:
    """Grid-stride: passes x blocks, each cell the wave (1, 2, ...) that runs it; NaN where there is no work."""
    blocks = np.arange(lau.blocks)
    start = np.arange(math.ceil(lau.passes))[:, None] * (lau.blocks * lau.threads) + blocks[None, :] * lau.threads
    return np.where(start < lau.accesses, (blocks // lau.wave_blocks + 1).astype(float)[None, :], np.nan)


def schedule(lau: Launch, samples: int = 4000) -> tuple[np.ndarray, np.ndarray]:
    """One-shot launches: (tile, place in launch order in waves) of a sample of blocks."""
    block = np.unique(np.linspace(0, lau.blocks - 1, samples).astype(np.int64))
    return tile_of(lau.order, block, lau.tiles), block / lau.wave_blocks

