"""Build a kernel file (a ``.cu`` defining ``launch_elu``) into a module with ``cpp_extension.load_inline``.

The binding (``kernels/common/binding.cpp``: argument checks, the dispatcher operator, autograd) is compiled once
and shared; each build compiles its kernel file alone, no torch header in it, and registers its table of launch
functions with the binding as ``torch.ops.<module.op_namespace>`` (elu_study.pytorch.ops is its Python side)."""

import contextlib
import ctypes
import functools
import hashlib
import json
import logging
import multiprocessing
import os
import re
import shlex
import shutil
import textwrap
import types
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm  # text bars: tqdm.auto warns on stderr in a notebook without ipywidgets

from elu_study.core.paths import KERNELS_DIR

COMMON_DIR = KERNELS_DIR / "common"
BINDING_SOURCE = COMMON_DIR / "binding.cpp"
BASE_CUDA_CFLAGS = ("-O3", "-lineinfo")
BUILD_LOG_ENV = "ELU_STUDY_BUILD_LOG"  # a file every build a run loads is appended to (core.fingerprint)
_NAMESPACE_FLAG, _DELEGATE_FLAG = "-DELU_OP_NAMESPACE=", "-DELU_DELEGATE16="
# A kernel file's "// elu-study: binding = WORD" puts its -DELU_BINDING_<WORD> functions in its table (common/table.h).
BINDING_FEATURES = ("storage16", "backward16", "launch-shape")
NVCC_ENV_FLAGS = ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS")  # flags nvcc reads from the environment


def flushes_denormals(flags) -> bool:
    """Whether nvcc flags (with those of NVCC_ENV_FLAGS) flush float32 denormals to zero in device arithmetic:
    --use_fast_math, or -ftz (--ftz) true or 1, as one token or two; an explicit -ftz wins, the last one given."""
    prepend, append = (shlex.split(os.environ.get(v, "")) for v in NVCC_ENV_FLAGS)
    tokens = [*prepend, *flags, *append]
    ftz = any(t.lstrip("-") == "use_fast_math" for t in tokens)
    for i, t in enumerate(tokens):
        if t.lstrip("-") == "ftz" and i + 1 < len(tokens):
            ftz = tokens[i + 1].lower() in ("true", "1")
        elif t.lstrip("-").startswith("ftz="):
            ftz = t.split("=", 1)[1].lower() in ("true", "1")
    return ftz


def configure_toolchain() -> None:
    """Without a GPU (and unless the user chose), target Hopper, which torch cannot guess; set CUDA_HOME to the
    toolkit holding nvcc (a wrapper in /usr/local/bin would make torch link against /usr/local)."""
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
    """A step name (``"2_float4"``, ``"float4"`` or ``"2"``), a file in a folder of kernels/ (``"peers/cub_transform"``,
    ``"sweeps/launch_shapes.cu"``), or the path of a user's own .cu file."""
    path = Path(name_or_path)
    under_kernels = KERNELS_DIR / path.with_suffix(".cu")
    if not path.is_absolute() and len(path.parts) > 1 and under_kernels.is_file():
        return under_kernels
    if path.suffix == ".cu":
        if not path.is_file():
            raise FileNotFoundError(f"no kernel file at {path}")
        return path.resolve()
    if path.suffix:
        raise ValueError(f"{name_or_path}: compile_variant builds a CUDA file ending in .cu that defines launch_elu "
                         f"(examples/my_elu.cu is a template), not a {path.suffix} file")
    variants, key = known_variants(), str(name_or_path)
    if file := next((f for stem, f in variants.items() if key in (stem, *stem.split("_", 1))), None):
        return file
    raise ValueError(f"unknown variant {key!r}; known variants: {', '.join(variants)} (or a path to a .cu file)")


def file_flags(source: str, key: str = "nvcc-flags") -> list[str]:
    """The words of a kernel file's ``// elu-study: <key> = ...`` lines: the nvcc flags it asks for, by default."""
    return [w for line in re.findall(rf"^//\s*elu-study:\s*{key}\s*=\s*(.*)$", source, re.MULTILINE) for w in line.split()]


def binding_features(source: str) -> list[str]:
    """Binding features a kernel file asks for in a ``// elu-study: binding = ...`` line (see BINDING_FEATURES)."""
    words = file_flags(source, "binding")
    if unknown := [w for w in words if w not in BINDING_FEATURES]:
        raise ValueError(f"unknown binding feature(s) {', '.join(unknown)}; known: {', '.join(BINDING_FEATURES)}")
    return words


@dataclass(frozen=True)
class BuildSpec:
    """Everything that determines a build; its hash names the extension."""

    source_path: Path
    cuda_flags: tuple[str, ...]
    cpp_flags: tuple[str, ...] = ()  # -DELU_OP_NAMESPACE=<ns> and -DELU_DELEGATE16=<ns>: how the binding registers it

    @property
    def label(self) -> str:
        return self.source_path.stem

    def extension_name(self) -> str:
        # Headers are #included, so load_inline's own check would miss edits to them.
        common = [p.read_text() for p in sorted(COMMON_DIR.iterdir()) if p.is_file() and p != BINDING_SOURCE]
        digest = hashlib.sha256("".join([self.source_path.read_text(), *common, " ".join(self.cuda_flags),
                                         " ".join(self.cpp_flags), os.environ.get("TORCH_CUDA_ARCH_LIST", ""),
                                         torch.__version__]).encode())
        return "elu_" + re.sub(r"\W", "_", self.label) + f"_{digest.hexdigest()[:12]}"

    def given(self, flag: str) -> str:
        """The value of the last ``<flag><value>`` in cpp_flags ("": none)."""
        return next((f.removeprefix(flag) for f in reversed(self.cpp_flags) if f.startswith(flag)), "")

    def op_namespace(self) -> str:
        """torch.ops' namespace of the build's operator: a -DELU_OP_NAMESPACE= flag's, else the extension name."""
        return self.given(_NAMESPACE_FLAG) or self.extension_name()


def build_spec(name_or_path: str | os.PathLike, extra_cuda_cflags: list[str] | tuple[str, ...] | None = None,
               extra_cflags: list[str] | tuple[str, ...] | None = None) -> BuildSpec:
    path = resolve_variant(name_or_path)
    for what, given in (("extra_cuda_cflags", extra_cuda_cflags), ("extra_cflags", extra_cflags)):
        if isinstance(given, (str, bytes)):
            raise TypeError(f"{what} must be a list of flags, e.g. {shlex.split(str(given))!r}, not a string")
        if bad := [f for f in given or () if not isinstance(f, str)]:
            raise TypeError(f"{what} must hold strings (one flag each), got {bad!r}")
    if unknown := [f for f in extra_cflags or () if not f.startswith((_NAMESPACE_FLAG, _DELEGATE_FLAG))]:
        raise ValueError(f"extra_cflags takes {_NAMESPACE_FLAG}<ns> and {_DELEGATE_FLAG}<ns> only (the binding is "
                         f"compiled once for every build); got {unknown}")
    flags = (*BASE_CUDA_CFLAGS, *file_flags(path.read_text()), *(extra_cuda_cflags or ()))
    return BuildSpec(path, tuple(flags), tuple(extra_cflags or ()))


def compile_variant(name_or_path: str | os.PathLike, *, extra_cuda_cflags: list[str] | tuple[str, ...] | None = None,
                    extra_cflags: list[str] | tuple[str, ...] | None = None):
    """Build a step of ``kernels/`` (``"2_float4"``, ``"2"`` or ``"float4"``) or your own ``.cu`` file and return
    its module, e.g. ``compile_variant("examples/my_elu.cu").elu(x, alpha=0.5)``. Compiling needs no GPU; without
    one (and without ``TORCH_CUDA_ARCH_LIST``) the build targets sm_90 only.

    Your file defines ``void launch_elu(const float* x, float* y, int64_t n, float alpha, cudaStream_t stream);``
    (``examples/my_elu.cu``, a template, states the contract in full). The binding calls it with n > 0 float32
    values in one dense run, on x and y that may be misaligned views (``x[1:]``), y possibly x (in place), on the
    current device and stream; it refuses other dtypes and devices, which the operator sends to ATen.
    ``kernels/common/backward.cu`` (ELU's backward) is appended to every build.

    ``extra_cuda_cflags``: nvcc flags as a list (``["-DMY_THREADS=128"]``, not a string), after the file's own
    ``// elu-study: nvcc-flags = ...``; ``extra_cflags``: ``-DELU_OP_NAMESPACE=<ns>`` and ``-DELU_DELEGATE16=<ns>``
    only. Cached on disk (``TORCH_EXTENSIONS_DIR``, by a hash of sources and flags) and in memory.

    The module: ``elu(x, alpha=1.0, out=None)`` and ``elu_backward(grad_output, x, alpha=1.0, is_result=False,
    out=None)``, the kernels alone; ``call_elu(x, alpha)`` and ``call_elu_(x, alpha)``, the dispatcher operator
    ``torch.ops.<op_namespace>.elu`` / ``elu_`` (autograd; ATen for what the kernels do not take); ``op_namespace``;
    ``spec``, what was built; with a ``// elu-study: binding = launch-shape`` line, ``set_launch_shape`` and
    ``launch_shapes``.
    ``elu_study.check_variant(module)`` checks it against F.elu and ``elu_study.time_variant(module)`` times it
    against copy_, as the study does its steps (on a GPU)."""
    configure_toolchain()
    return _load(build_spec(name_or_path, extra_cuda_cflags, extra_cflags))


def load_arguments(spec: BuildSpec) -> dict:
    """What ``load_inline`` receives for a build, but its name and verbosity: the table of its launch functions, its
    kernel file, ELU's backward (every build's), no torch header. ``#line`` makes compiler messages name each file
    and its own line numbers, by its full path: nvcc's dependency file lists those names, and a name ninja cannot
    find (a relative one: the build runs in the extensions folder) is a missing input, which would compile the
    build again on every load."""
    features = [f"-DELU_BINDING_{w.upper().replace('-', '_')}" for w in binding_features(spec.source_path.read_text())]
    if flushes_denormals(spec.cuda_flags):  # nvcc defines no macro for it: the backward's exp must know
        features.append("-DELU_FLUSHES_DENORMALS=1")
    return {
        "cpp_sources": "",  # no host code of its own: the shared binding registers it
        "cuda_sources": [f'#line 1 "{p}"\n{p.read_text()}'
                         for p in (COMMON_DIR / "table.cu", spec.source_path, COMMON_DIR / "backward.cu")],
        "extra_cuda_cflags": [*spec.cuda_flags, *features],
        "extra_include_paths": [str(KERNELS_DIR), str(spec.source_path.parent)],
        "extra_ldflags": ["-Wl,--no-undefined"],  # a missing launch function fails here, not at load time
        "no_implicit_headers": True,
        "is_python_module": False,
    }


@functools.cache
def binding():
    """The shared binding (``kernels/common/binding.cpp``), compiled once per torch version and binding source."""
    source = BINDING_SOURCE.read_text()
    digest = hashlib.sha256((source + (COMMON_DIR / "table.h").read_text() + torch.__version__).encode())
    return _cpp_extension().load_inline(name=f"elu_binding_{digest.hexdigest()[:12]}", cpp_sources=source,
                                        extra_cflags=["-O2"], extra_include_paths=[str(KERNELS_DIR)], with_cuda=True)


class BuildError(RuntimeError):
    """A kernel file that does not compile or link: the compiler's errors, naming the file and its lines."""


_UNDEFINED = re.compile(r"undefined reference to `(\w+)\(([^)]*)\)'")


def explain(spec: BuildSpec, log: str) -> str:
    """What a failed build's log says is wrong: the compiler's errors in context, the launch functions missing."""
    lines = log.splitlines()
    noise = (" -o ", "ninja", "error detected in the compilation", "collect2", "FAILED")
    keep = [i for i, line in enumerate(lines) if re.search(r"\berror\b|undefined reference", line)
            and not any(n in line for n in noise)]
    blocks = dict.fromkeys(tuple(line for line in lines[i:i + 3] if line.strip()) for i in keep)  # each error once
    shown = [line for block in blocks for line in block]
    for name, args in dict(_UNDEFINED.findall(log)).items():
        shown.append(f"{spec.source_path.name} does not define void {name}({args}): every build defines launch_elu "
                     "(see kernels/common/table.h for each launch function and what it receives)")
    text = f"{spec.source_path} did not build:\n" + "\n".join(shown or lines[-20:])
    return text.replace(f"{KERNELS_DIR.parent}/", "")  # the repository's files by their names in it (kernels/...)


def _compile(spec: BuildSpec) -> Path:
    """The build's shared library, compiled (or found in the disk cache)."""
    try:
        return Path(_cpp_extension().load_inline(name=spec.extension_name(), **load_arguments(spec)))
    except RuntimeError as err:
        raise BuildError(explain(spec, str(err))) from None


def register(library: Path, name: str, namespace: str, delegate16: str = ""):
    """A built library as a module: its table registered with the binding as ``torch.ops.<namespace>``."""
    table = ctypes.CDLL(str(library)).elu_kernel_table
    table.restype = ctypes.c_void_p
    module = types.ModuleType(name, f"the build {name}, torch.ops.{namespace}")
    module.__file__ = str(library)
    module.__dict__.update(binding().register_variant(namespace, table(), delegate16))
    return module


@functools.cache
def _load(spec: BuildSpec):
    module = register(_compile(spec), spec.extension_name(), spec.op_namespace(), spec.given(_DELEGATE_FLAG))
    module.spec = spec
    note_build(spec)
    return module


def note_build(spec: BuildSpec) -> None:
    """Append a loaded build to the run's build log ($ELU_STUDY_BUILD_LOG), if any. Only files under kernels/: a file
    written elsewhere (a test's own kernel) is an input of the code that wrote it."""
    log = os.environ.get(BUILD_LOG_ENV)
    if not log or not spec.source_path.is_relative_to(KERNELS_DIR):
        return
    variant = spec.source_path.relative_to(KERNELS_DIR).with_suffix("").as_posix()
    extra = list(spec.cuda_flags[len(BASE_CUDA_CFLAGS) + len(file_flags(spec.source_path.read_text())):])
    with open(log, "a") as f:  # one short append a line: the processes of one run share the file
        f.write(json.dumps({"variant": variant, "flags": extra, "cpp_flags": list(spec.cpp_flags)}) + "\n")


def built_library(module) -> Path:
    """The shared object that holds a compiled variant's SASS."""
    return Path(module.__file__)


def find_cuda_tool(tool: str) -> str:
    """A CUDA binary tool (cuobjdump, nvdisasm, ncu): from PATH, $CUDA_HOME/bin, or Triton's wheel."""
    configure_toolchain()
    dirs = [Path(os.environ["CUDA_HOME"], "bin")] if os.environ.get("CUDA_HOME") else []
    with contextlib.suppress(ImportError):
        import triton  # noqa: PLC0415 - ships cuobjdump and nvdisasm beside its ptxas
        dirs.append(Path(triton.__file__).parent / "backends" / "nvidia" / "bin")
    if not (found := shutil.which(tool) or next((str(d / tool) for d in dirs if (d / tool).is_file()), None)):
        raise FileNotFoundError(f"{tool} not found on PATH, in $CUDA_HOME/bin or in Triton's wheel: install the CUDA "
                                "toolkit")
    return found


def build_binding_in_subprocess() -> None:
    """``build_all``'s first job: the shared binding compiled into the disk cache."""
    configure_toolchain()
    binding()


def build_in_subprocess(job: tuple) -> str:
    """One job of ``build_all`` compiled: (variant, nvcc flags) or (variant, nvcc flags, binding flags)."""
    name, flags, *cpp = job
    configure_toolchain()
    return str(_compile(build_spec(name, list(flags), list(cpp[0]) if cpp else None)))


def default_workers(builds: int) -> int:
    """``build_all``'s processes where none are asked for: one per core, at most one per build."""
    return max(1, min(builds, os.cpu_count() or 2))


def build_all(jobs: list[tuple], workers: int | None = None) -> None:
    """Compile several (variant, extra flags) builds side by side, each in its own process, for the disk cache;
    spawned workers where this process has used CUDA already (a fork could not initialize CUDA again). The shared
    binding, the longest compile, starts first beside them: a build's library does not link to it (``register``
    hands its table to the binding at load time), so nothing waits for it but this process's own load."""
    context = multiprocessing.get_context("spawn") if torch.cuda.is_initialized() else None
    with ProcessPoolExecutor(max_workers=workers or default_workers(len(jobs) + 1), mp_context=context) as pool, \
            tqdm(total=len(jobs) + 1, desc="compiling", unit="build", mininterval=0) as bar:  # every build shown
        futures = {pool.submit(build_binding_in_subprocess): ("the shared binding", ())}
        futures |= {pool.submit(build_in_subprocess, job): job for job in jobs}
        for done in as_completed(futures):
            done.result()
            bar.set_postfix_str(textwrap.shorten(" ".join([futures[done][0], *futures[done][1]]), 50), refresh=False)
            bar.update()
    binding()  # loaded from the disk cache the worker filled
