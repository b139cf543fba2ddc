"""Build a kernel file (a ``.cu`` defining ``launch_elu``) into a module with ``cpp_extension.load_inline``.

``kernels/common/binding.cpp`` gives every variant ``module.elu(x, alpha=1.0, out=None)`` and a dispatcher
operator, ``torch.ops.<module.op_namespace>.elu`` (elu_study.pytorch.ops is its Python side)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import multiprocessing
import os
import re
import shutil
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm  # text bars: tqdm.auto warns on stderr in a notebook without ipywidgets

from elu_study.core.paths import KERNELS_DIR

COMMON_DIR = KERNELS_DIR / "common"
# Appended to every build's CUDA source: module.elu_backward (hashed by extension_name with the rest of common/).
BACKWARD_SOURCE = COMMON_DIR / "backward.cu"
BASE_CUDA_CFLAGS = ("-O3", "-lineinfo")
BUILD_LOG_ENV = "ELU_STUDY_BUILD_LOG"  # a file every build a run loads is appended to (core.fingerprint)
_FLAGS_DIRECTIVE = re.compile(r"^//\s*elu-study:\s*nvcc-flags\s*=\s*(.*)$", re.MULTILINE)
_NAMESPACE_FLAG = "-DELU_OP_NAMESPACE="
_BINDING_DIRECTIVE = re.compile(r"^//\s*elu-study:\s*binding\s*=\s*(.*)$", re.MULTILINE)
# What a kernel file's "// elu-study: binding = WORD" line asks binding.cpp for (compiled with -DELU_BINDING_<WORD>):
# storage16, elu() on float16 and bfloat16 (launch_elu_16); backward16, elu_backward() too (launch_elu_backward_16);
# launch-shape, set_launch_shape(threads, vectors, hints, blocks_per_sm) chosen at run time.
BINDING_FEATURES = ("storage16", "backward16", "launch-shape")


def configure_toolchain() -> None:
    """Let the build work without a GPU unless the user chose otherwise: target Hopper (torch cannot guess), and set
    CUDA_HOME to the toolkit holding nvcc (a wrapper in /usr/local/bin would make torch link against /usr/local)."""
    if not os.environ.get("CUDA_HOME") and not os.environ.get("CUDA_PATH"):
        if home := next((c for c in ("/usr/local/cuda", "/usr/local/cuda-13.0") if Path(c, "bin", "nvcc").exists()), None):
            os.environ["CUDA_HOME"] = home
    if not os.environ.get("TORCH_CUDA_ARCH_LIST") and not torch.cuda.is_available():
        os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"


@functools.cache
def _cpp_extension():
    configure_toolchain()
    # Without a GPU this import logs "No CUDA runtime is found" on stderr, an output a GPU run's notebook lacks.
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    from torch.utils import cpp_extension  # noqa: PLC0415 - lazy: it reads CUDA_HOME at import, so after configure_toolchain

    return cpp_extension


def known_variants() -> dict[str, Path]:
    """The study's steps, ``{"1_naive": Path(...), ...}``, in step order."""
    return {p.stem: p for p in sorted(KERNELS_DIR.glob("[0-9]*_*.cu"), key=lambda p: int(p.name.split("_")[0]))}


def resolve_variant(name_or_path: str | os.PathLike) -> Path:
    """A step name (``"2_float4"``, ``"float4"`` or ``"2"``), a file in a folder of kernels/ (``"peers/cub_transform"``),
    or the path of a user's own .cu file."""
    path = Path(name_or_path)
    under_kernels = KERNELS_DIR / path.with_suffix(".cu")
    if not path.is_absolute() and len(path.parts) > 1 and under_kernels.is_file():
        return under_kernels  # a file beside the steps, e.g. "peers/cub_transform" or "sweeps/launch_shapes.cu"
    if path.suffix == ".cu":
        if not path.is_file():
            raise FileNotFoundError(f"no kernel file at {path}")
        return path.resolve()
    variants, key = known_variants(), str(name_or_path)
    for stem, file in variants.items():
        number, _, label = stem.partition("_")
        if key in (stem, number, label):
            return file
    raise ValueError(f"unknown variant {key!r}; known variants: {', '.join(variants)} (or a path to a .cu file)")


def file_flags(source: str) -> list[str]:
    """nvcc flags a kernel file asks for in a ``// elu-study: nvcc-flags = ...`` line."""
    return [flag for match in _FLAGS_DIRECTIVE.findall(source) for flag in match.split()]


def binding_features(source: str) -> list[str]:
    """Binding features a kernel file asks for in a ``// elu-study: binding = ...`` line (see BINDING_FEATURES)."""
    words = [w for match in _BINDING_DIRECTIVE.findall(source) for w in match.split()]
    if unknown := [w for w in words if w not in BINDING_FEATURES]:
        raise ValueError(f"unknown binding feature(s) {', '.join(unknown)}; known: {', '.join(BINDING_FEATURES)}")
    return words


@dataclass(frozen=True)
class BuildSpec:
    """Everything that determines a build; its hash names the extension."""

    source_path: Path
    cuda_flags: tuple[str, ...]
    cpp_flags: tuple[str, ...] = ()  # binding.cpp's, e.g. -DELU_OP_NAMESPACE=... (the operator's namespace)

    @property
    def label(self) -> str:
        return self.source_path.stem

    def cuda_source(self) -> str:
        return self.source_path.read_text()

    def extension_name(self) -> str:
        digest = hashlib.sha256()
        # Headers are #included, so load_inline's own check would miss edits to them.
        for part in (self.cuda_source(), *(p.read_text() for p in sorted(COMMON_DIR.iterdir()) if p.is_file()),
                     " ".join(self.cuda_flags), " ".join(self.cpp_flags), os.environ.get("TORCH_CUDA_ARCH_LIST", ""),
                     torch.__version__):
            digest.update(part.encode())
        safe = re.sub(r"\W", "_", self.label)
        return f"elu_{safe}_{digest.hexdigest()[:12]}"

    def op_namespace(self) -> str:
        """torch.ops' namespace of the build's operator: a -DELU_OP_NAMESPACE= flag's, else the extension name."""
        given = [f.removeprefix(_NAMESPACE_FLAG) for f in self.cpp_flags if f.startswith(_NAMESPACE_FLAG)]
        return given[-1] if given else self.extension_name()


def build_spec(name_or_path: str | os.PathLike, extra_cuda_cflags: list[str] | tuple[str, ...] | None = None,
               extra_cflags: list[str] | tuple[str, ...] | None = None) -> BuildSpec:
    path = resolve_variant(name_or_path)
    flags = (*BASE_CUDA_CFLAGS, *file_flags(path.read_text()), *(extra_cuda_cflags or ()))
    return BuildSpec(path, tuple(flags), tuple(extra_cflags or ()))


def compile_variant(name_or_path: str | os.PathLike, *, extra_cuda_cflags: list[str] | tuple[str, ...] | None = None,
                    extra_cflags: list[str] | tuple[str, ...] | None = None, verbose: bool = False):
    """Build a step from ``kernels/`` (or your own ``.cu`` file) and return its module, e.g.
    ``compile_variant("1_naive").elu(x, alpha=0.5)``. ``extra_cflags`` go to binding.cpp (``-DELU_OP_NAMESPACE=``).
    Cached on disk (``TORCH_EXTENSIONS_DIR``, by a hash of sources and flags) and in memory."""
    configure_toolchain()
    return _load(build_spec(name_or_path, extra_cuda_cflags, extra_cflags), verbose)


def load_arguments(spec: BuildSpec) -> dict:
    """What ``load_inline`` receives for a build, but its name and verbosity: sources, flags and include paths."""
    return {
        "cpp_sources": (COMMON_DIR / "binding.cpp").read_text(),
        "extra_cflags": ["-O2", *(f"-DELU_BINDING_{w.upper().replace('-', '_')}"
                                  for w in binding_features(spec.cuda_source())),
                         *spec.cpp_flags,
                         *([] if any(f.startswith(_NAMESPACE_FLAG) for f in spec.cpp_flags)
                           else [f"{_NAMESPACE_FLAG}{spec.op_namespace()}"])],
        # Every build gets the shared backward pass (load_inline joins the list into one .cu file).
        "cuda_sources": [spec.cuda_source(), BACKWARD_SOURCE.read_text()],
        "extra_cuda_cflags": list(spec.cuda_flags),
        "extra_include_paths": [str(KERNELS_DIR), str(spec.source_path.parent)],
    }


@functools.lru_cache(maxsize=None)
def _load(spec: BuildSpec, verbose: bool = False):
    module = _cpp_extension().load_inline(name=spec.extension_name(), **load_arguments(spec), verbose=verbose)
    module.spec = spec
    note_build(spec)
    return module


def note_build(spec: BuildSpec) -> None:
    """Append a build this process loaded to the run's build log, where one is set (``$ELU_STUDY_BUILD_LOG``, read
    by elu_study.core.fingerprint). Only files under kernels/: a file written elsewhere (a test's own kernel) is an
    input of the code that wrote it."""
    log = os.environ.get(BUILD_LOG_ENV)
    if not log or not spec.source_path.is_relative_to(KERNELS_DIR):
        return
    variant = spec.source_path.relative_to(KERNELS_DIR).with_suffix("").as_posix()
    extra = list(spec.cuda_flags[len(BASE_CUDA_CFLAGS) + len(file_flags(spec.cuda_source())):])
    with open(log, "a") as f:  # one short append a line: the processes of one run share the file
        f.write(json.dumps({"variant": variant, "flags": extra, "cpp_flags": list(spec.cpp_flags)}) + "\n")


def built_library(module) -> Path:
    """The shared object that holds a compiled variant's SASS."""
    return Path(module.__file__)


def find_cuda_tool(tool: str) -> str:
    """A CUDA binary tool (cuobjdump, nvdisasm): from PATH, CUDA_HOME, Triton's wheel, or nvidia wheels."""
    configure_toolchain()
    dirs = [os.environ.get("CUDA_HOME") and str(Path(os.environ["CUDA_HOME"], "bin"))]
    with contextlib.suppress(ImportError):
        import triton  # noqa: PLC0415 - ships cuobjdump and nvdisasm beside its ptxas
        dirs.append(str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin"))
    with contextlib.suppress(ImportError):
        import nvidia  # noqa: PLC0415 - the nvidia-cuda-cuobjdump / -nvdisasm wheels install into this namespace
        dirs += [str(p) for base in nvidia.__path__ for p in Path(base).glob("*/bin")]
    found = shutil.which(tool) or next((str(Path(d, tool)) for d in dirs if d and Path(d, tool).is_file()), None)
    if found is None:
        raise FileNotFoundError(f"{tool} not found: install the CUDA toolkit, or torch with its Triton wheel")
    return found


def build_in_subprocess(job: tuple) -> str:
    """One build of ``build_all``: (variant, nvcc flags) or (variant, nvcc flags, binding.cpp flags)."""
    name, flags, *cpp = job
    return compile_variant(name, extra_cuda_cflags=list(flags), extra_cflags=list(cpp[0]) if cpp else None).__name__


def build_all(jobs: list[tuple], workers: int | None = None) -> None:
    """Compile several (variant, extra flags) builds side by side, each in its own process, for the disk cache.
    A process that has used CUDA already builds in spawned workers (a fork could not initialize CUDA again)."""
    workers = workers or max(1, min(len(jobs), os.cpu_count() or 2))
    context = multiprocessing.get_context("spawn") if torch.cuda.is_initialized() else None
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        list(tqdm(pool.map(build_in_subprocess, jobs), total=len(jobs), desc="compiling", unit="variant"))
