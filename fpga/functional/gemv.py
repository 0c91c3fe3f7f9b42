"""The int8 x int8 -> int32 products of a decode, as a Numba kernel that XLA calls inside the jitted datapath
(docs/w8a8.md 4.2, docs/functional.md "Speed").

A decode multiplies one int8 row (or two) by every weight matrix: 494 MB of int8 weights per Qwen2.5-0.5B token,
read once. XLA's CPU int8 dot does this far below memory speed (46-50 ms per token for two rows, several times
slower for one), so for blocks of at most :data:`MAX_ROWS` rows the datapath calls :func:`matmul_i8_ffi`: an XLA
FFI custom call (``jax.ffi.ffi_call``) whose handler is a Numba ``cfunc``. It runs inside the compiled layer like
any other op, on XLA's own buffers: no host round trip, no copy, no extra dispatch. The kernel sign-extends int8 to
int16, multiplies in int16 (exact: ``|w x| <= 2**14``) and accumulates in int32 over the contiguous rows of
``w (N, K)``, the output channels split over XLA's own intra-op thread pool (:func:`_handler`). On x86-64 with AVX2 the
inner sum is written with ``vpmaddwd`` explicitly (:func:`_matmul_rows_avx2`, 64 int8 per step): LLVM's own
vectorization of the plain loop (:func:`_matmul_rows_loop`, the kernel elsewhere) depends on the CPU's tuning, and
took 8 int8 per step on an Intel Xeon that prefers 256-bit vectors (4.3 GB/s of weights, a third of one core's
memory speed). Each output is an exact int32 sum (while ``K * 2**14 < 2**31``, K up to 131,071), so it has the same
bits as XLA's product, whatever the order of the additions.

The handler reads XLA's call frame (``XLA_FFI_CallFrame``, ``xla/ffi/api/c_api.h`` of the installed jaxlib,
``jax.ffi.include_dir()``) as 64-bit words: the layout is the header's, checked against its struct sizes and
API version at registration (:func:`available`); where it does not match, or the backend is not the CPU, the
datapath keeps XLA's dot (the same bits, slower).

:func:`matmul_i8_reference` is the plain numpy reference (int64 products and sums) the equivalence tests compare
against (tests/test_functional_gemv.py).
"""

from __future__ import annotations

import ctypes
import functools
import platform
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import llvmlite.binding
import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

import fpga  # noqa: F401  (sets the project's Numba cache directory before the first compilation)

#: the largest row count sent to the kernel; more rows go to XLA's dot, which won from 4 rows on (0.5B shapes,
#: CPU time: 2 rows 6.7 against 11.3 ms for the LM head, 4 rows 12.8 against 13.2, 8 rows 29.8 against 16.8; the
#: one-thread plain-loop kernel of 2026-12-06 on an AMD EPYC)
MAX_ROWS = 2
TARGET = "hwmodel_w8a8_matmul_i8"

# XLA FFI C API (xla/ffi/api/c_api.h), the version this handler is written against, and the word offsets
FFI_API_VERSION = (0, 3)
_EXTENSION_METADATA = 1  # XLA_FFI_Extension_Metadata
_STAGE_EXECUTE = 3  # XLA_FFI_ExecutionStage_EXECUTE
_FRAME_WORDS = 22  # XLA_FFI_CallFrame: size, ext, api, ctx, stage, args[5], rets[5], attrs[6], future
_ARGS_SIZE, _ARGS_PTRS = 7, 9  # XLA_FFI_Args.size, .args
_RETS_SIZE, _RETS_PTRS = 12, 14  # XLA_FFI_Rets.size, .rets
_BUF_DATA, _BUF_DIMS = 3, 5  # XLA_FFI_Buffer: size, ext, dtype, data, rank, dims
_FRAME_API, _FRAME_CTX, _FRAME_FUTURE = 2, 3, 21  # XLA_FFI_CallFrame.api, .ctx, .future
# XLA_FFI_Api: struct_size, extension_start, api_version (3 words), internal_api, then one word per function
_API_WORDS = 24
_API_ERROR_DESTROY, _API_SCHEDULE, _API_NUM_THREADS, _API_FUTURE_CREATE, _API_FUTURE_SET = 8, 17, 18, 19, 20
#: the most parts one product is split into (one per thread of XLA's pool), and the fewest output channels a part
MAX_PARTS, MIN_PART_CHANNELS = 8, 256
# the handler's scratch result (int64 words): parts not finished, the future, the API, the operands' and the
# result's addresses, R, K, N, the part count, then each scheduled part's index (its task's data points at it)
_S_LEFT, _S_FUTURE, _S_API, _S_X, _S_W, _S_OUT, _S_ROWS, _S_K, _S_N, _S_PARTS, _S_PART0 = range(11)
SCRATCH_WORDS = _S_PART0 + MAX_PARTS


#: int8 elements per AVX2 step of :func:`_dot_i8_avx2` (16 x i16 -> 8 x i32 by ``vpmaddwd``) and its accumulators
_LANES, _UNROLL = 16, 4


@numba.njit(cache=True, nogil=True)
def _matmul_rows_loop(x: np.ndarray, w: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - compiled
    """``out[r, n] = sum_k x[r, k] * w[n, k]`` for int8 ``x (R, K)``, ``w (N, K)``; int32 ``out (R, N)``, as a
    plain loop that LLVM vectorizes."""
    n_rows, k_in = x.shape
    for n in range(w.shape[0]):
        for r in range(n_rows):
            acc = np.int32(0)
            for k in range(k_in):
                acc += np.int32(np.int16(w[n, k]) * np.int16(x[r, k]))
            out[r, n] = acc


@intrinsic
def _dot_i8_avx2(typingctx, w, x, w_at, x_at, k):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """``sum(w.flat[w_at : w_at + k] * x.flat[x_at : x_at + k])`` as int32 for int8 arrays, ``k`` a multiple of
    ``_LANES * _UNROLL``: 16 bytes of each operand sign-extended to 16 x i16 and multiplied-and-pair-added into
    8 x i32 by ``llvm.x86.avx2.pmadd.wd`` (``vpmaddwd``, exact: ``|w x| <= 2**14``), in ``_UNROLL`` independent
    accumulators. LLVM's own vectorization of the loop in :func:`_matmul_rows_loop` picks 8 int8 per step on
    CPUs whose tuning prefers 256-bit vectors (0.5B LM head, 1 thread: 28 ms against 11.5 ms for this one)."""
    sig = types.int32(w, x, types.intp, types.intp, types.intp)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        w_arr, x_arr, w_at, x_at, k = args
        i8p = ir.IntType(8).as_pointer()
        wp = builder.gep(
            builder.bitcast(context.make_array(signature.args[0])(context, builder, w_arr).data, i8p), [w_at]
        )
        xp = builder.gep(
            builder.bitcast(context.make_array(signature.args[1])(context, builder, x_arr).data, i8p), [x_at]
        )
        v_i8, v_i16, v_i32 = (ir.VectorType(ir.IntType(b), n) for b, n in ((8, 16), (16, 16), (32, 8)))
        pmadd = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(v_i32, [v_i16, v_i16]), "llvm.x86.avx2.pmadd.wd"
        )
        reduce_add = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.IntType(32), [v_i32]), "llvm.vector.reduce.add.v8i32"
        )
        accs = [cgutils.alloca_once_value(builder, ir.Constant(v_i32, None)) for _ in range(_UNROLL)]
        step = ir.Constant(k.type, _LANES * _UNROLL)
        with cgutils.for_range(builder, builder.udiv(k, step)) as loop:
            base = builder.mul(loop.index, step)
            for u, acc in enumerate(accs):
                at = builder.add(base, ir.Constant(k.type, _LANES * u))
                wv = builder.load(builder.bitcast(builder.gep(wp, [at]), v_i8.as_pointer()), align=1)
                xv = builder.load(builder.bitcast(builder.gep(xp, [at]), v_i8.as_pointer()), align=1)
                p = builder.call(pmadd, [builder.sext(wv, v_i16), builder.sext(xv, v_i16)])
                builder.store(builder.add(builder.load(acc), p), acc)
        total = builder.load(accs[0])
        for acc in accs[1:]:
            total = builder.add(total, builder.load(acc))
        return builder.call(reduce_add, [total])

    return sig, codegen


@numba.njit(cache=True, nogil=True)
def _matmul_rows_avx2(x: np.ndarray, w: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - compiled
    """:func:`_matmul_rows_loop` with the inner sum by :func:`_dot_i8_avx2` (the tail of ``K`` beyond a multiple
    of 64 by the plain loop). Needs AVX2 (:func:`_target_has_avx2`)."""
    n_rows, k_in = x.shape
    k_vec = k_in - k_in % (_LANES * _UNROLL)
    for n in range(w.shape[0]):
        for r in range(n_rows):
            acc = _dot_i8_avx2(w, x, n * k_in, r * k_in, k_vec)
            for k in range(k_vec, k_in):
                acc += np.int32(np.int16(w[n, k]) * np.int16(x[r, k]))
            out[r, n] = acc


def _target_has_avx2() -> bool:
    """Whether Numba compiles for an x86-64 CPU with AVX2 (its ``NUMBA_CPU_FEATURES`` if set, else the host's)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    features = numba.core.config.CPU_FEATURES
    if features is None:  # as numba.core.codegen.JITCPUCodegen._get_host_cpu_features
        features = llvmlite.binding.get_host_cpu_features().flatten()
    return "+avx2" in features.split(",")


#: the kernel the FFI handler and :func:`matmul_i8_host` run (both compute the same exact int32 sums)
KERNELS = {"avx2": _matmul_rows_avx2, "loop": _matmul_rows_loop}
KERNEL = "avx2" if _target_has_avx2() else "loop"
_matmul_rows = KERNELS[KERNEL]


@intrinsic
def _ptr(typingctx, addr):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """An int64 address as a ``void*`` (for ``numba.carray``)."""

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        return builder.inttoptr(args[0], cgutils.voidptr_t)

    return types.voidptr(types.int64), codegen


@numba.njit(inline="always")
def _words(addr: int, n: int) -> np.ndarray:  # pragma: no cover - compiled
    return numba.carray(_ptr(addr), (n,), np.int64)


@intrinsic
def _call_api(typingctx, fn, args):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """Call the FFI API function at address ``fn`` with its argument struct at address ``args``; returns the
    ``XLA_FFI_Error*`` it returns as an int64 (0: success)."""

    def codegen(context, builder, signature, call_args):  # type: ignore[no-untyped-def]
        fn_type = ir.FunctionType(cgutils.voidptr_t, [cgutils.voidptr_t])
        ret = builder.call(
            builder.inttoptr(call_args[0], fn_type.as_pointer()), [builder.inttoptr(call_args[1], cgutils.voidptr_t)]
        )
        return builder.ptrtoint(ret, ir.IntType(64))

    return types.int64(types.int64, types.int64), codegen


@intrinsic
def _fetch_sub_one(typingctx, addr):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """Atomically decrement the int64 at address ``addr``; returns the value before."""

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        word = builder.inttoptr(args[0], ir.IntType(64).as_pointer())
        return builder.atomic_rmw("sub", word, ir.Constant(ir.IntType(64), 1), "acq_rel")

    return types.int64(types.int64), codegen


@numba.njit(cache=True, nogil=True)
def _api_call(api: int, index: int, args: np.ndarray) -> int:  # pragma: no cover - compiled
    """Call word ``index`` of the ``XLA_FFI_Api`` at ``api`` with the argument struct ``args``; on an error, destroy
    it (``XLA_FFI_Error_Destroy``) and return 1, else 0."""
    err = _call_api(_words(api, _API_WORDS)[index], args.ctypes.data)
    if err == 0:
        return 0
    destroy = np.array([24, 0, err], np.int64)  # XLA_FFI_Error_Destroy_Args: size, ext, error
    _call_api(_words(api, _API_WORDS)[_API_ERROR_DESTROY], destroy.ctypes.data)
    return 1


@numba.njit(cache=True, nogil=True)
def _run_part(scratch: int, part: int) -> None:  # pragma: no cover - compiled
    """Part ``part`` of the product whose operands the scratch words at ``scratch`` hold: output channels
    ``[N part / parts, N (part + 1) / parts)``, into the result's own columns."""
    s = _words(scratch, SCRATCH_WORDS)
    rows, k_in, n_out, parts = s[_S_ROWS], s[_S_K], s[_S_N], s[_S_PARTS]
    x = numba.carray(_ptr(s[_S_X]), (rows, k_in), np.int8)
    w = numba.carray(_ptr(s[_S_W]), (n_out, k_in), np.int8)
    out = numba.carray(_ptr(s[_S_OUT]), (rows, n_out), np.int32)
    lo, hi = n_out * part // parts, n_out * (part + 1) // parts
    _matmul_rows(x, w[lo:hi], out[:, lo:hi])


@numba.njit(cache=True, nogil=True)
def _finish_part(scratch: int) -> None:  # pragma: no cover - compiled
    """One part is done: the last one makes the call's future available (after which XLA may reuse the scratch,
    so the future and the API are read before the count is decremented)."""
    s = _words(scratch, SCRATCH_WORDS)
    future, api = s[_S_FUTURE], s[_S_API]
    if _fetch_sub_one(scratch + 8 * _S_LEFT) == 1:
        _api_call(api, _API_FUTURE_SET, np.array([24, 0, future], np.int64))  # XLA_FFI_Future_SetAvailable_Args


@numba.cfunc(types.void(types.voidptr), nogil=True, cache=True)
def _part_task(data):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """An ``XLA_FFI_Task`` run on XLA's thread pool: ``data`` points at its part's index word in the scratch."""
    word = numba.carray(data, (1,), np.int64)
    part = word[0]
    scratch = word.ctypes.data - 8 * (_S_PART0 + part)
    _run_part(scratch, part)
    _finish_part(scratch)


_PART_TASK = _part_task.address


@numba.cfunc(types.voidptr(types.voidptr), nogil=True)
def _handler(frame_ptr):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """The XLA FFI handler: answers the metadata query at registration, and at execution reads the two int8
    operands ``x (R, K)``, ``w (N, K)``, the int32 result ``(R, N)`` (row-major: ``ffi_call``'s default layouts)
    and the int64 scratch result, and runs :func:`_matmul_rows` over the output channels in one part per thread
    of XLA's intra-op pool (``XLA_FFI_ThreadPool_NumThreads``, at most :data:`MAX_PARTS`, parts of at least
    :data:`MIN_PART_CHANNELS` channels): part 0 on this thread, the others scheduled on the pool
    (``XLA_FFI_ThreadPool_Schedule``), and the call completes through an ``XLA_FFI_Future`` the last part makes
    available (nothing waits, so a busy or one-thread pool cannot deadlock it). With one part, no future: the call
    is synchronous. Shapes and dtypes were checked when the call was traced (:func:`matmul_i8_ffi`). Returns NULL
    (success). Not cached: it holds the address of :func:`_part_task`, which differs from process to process."""
    frame = numba.carray(frame_ptr, (_FRAME_WORDS,), np.int64)
    if frame[1] != 0:  # an extension: the metadata query at registration fills the API version
        ext = _words(frame[1], 4)  # XLA_FFI_Metadata_Extension: base {size, type, next}, metadata*
        if (ext[1] & 0xFFFFFFFF) == _EXTENSION_METADATA:
            meta = _words(ext[3], 4)  # XLA_FFI_Metadata: size, api_version {size, ext, major | minor << 32}
            meta[3] = np.int64(FFI_API_VERSION[0]) | (np.int64(FFI_API_VERSION[1]) << 32)
            return _ptr(0)
    if (frame[4] & 0xFFFFFFFF) != _STAGE_EXECUTE or frame[_ARGS_SIZE] != 2 or frame[_RETS_SIZE] != 2:
        return _ptr(0)
    api, ctx = frame[_FRAME_API], frame[_FRAME_CTX]
    args = _words(frame[_ARGS_PTRS], 2)
    rets = _words(frame[_RETS_PTRS], 2)
    bx, bw, bo, bs = _words(args[0], 6), _words(args[1], 6), _words(rets[0], 6), _words(rets[1], 6)
    scratch = bs[_BUF_DATA]
    s = _words(scratch, SCRATCH_WORDS)
    xd = _words(bx[_BUF_DIMS], 2)
    s[_S_API], s[_S_X], s[_S_W], s[_S_OUT] = api, bx[_BUF_DATA], bw[_BUF_DATA], bo[_BUF_DATA]
    s[_S_ROWS], s[_S_K], s[_S_N] = xd[0], xd[1], _words(bw[_BUF_DIMS], 2)[0]
    # XLA_FFI_ThreadPool_NumThreads_Args (size, ext, ctx, int64_t*), then the word the count is written to
    threads = np.array([32, 0, ctx, 0, 0], np.int64)
    threads[3] = threads.ctypes.data + 8 * 4
    parts = 1
    if _api_call(api, _API_NUM_THREADS, threads) == 0:
        parts = max(1, min(MAX_PARTS, threads[4], s[_S_N] // MIN_PART_CHANNELS))
    future = np.array([24, 0, 0], np.int64)  # XLA_FFI_Future_Create_Args: size, ext, future (out)
    if parts > 1 and _api_call(api, _API_FUTURE_CREATE, future) != 0:
        parts = 1
    s[_S_PARTS] = parts
    if parts == 1:
        _run_part(scratch, 0)
        return _ptr(0)
    s[_S_FUTURE], s[_S_LEFT] = future[2], parts
    frame[_FRAME_FUTURE] = future[2]  # XLA waits for it before the result is used
    schedule = np.array([40, 0, ctx, _PART_TASK, 0], np.int64)  # XLA_FFI_ThreadPool_Schedule_Args
    for part in range(1, parts):
        s[_S_PART0 + part] = part
        schedule[4] = scratch + 8 * (_S_PART0 + part)
        if _api_call(api, _API_SCHEDULE, schedule) != 0:  # no pool after all: this thread runs the part
            _run_part(scratch, part)
            _finish_part(scratch)
    _run_part(scratch, 0)
    _finish_part(scratch)
    return _ptr(0)


#: the fields of the C API structs the handler reads, in order (every field is one 64-bit word, nested structs
#: excepted: XLA_FFI_Args and XLA_FFI_Rets are 5 words, XLA_FFI_Attrs 6), as ``xla/ffi/api/c_api.h`` declares them
_LAYOUT = {
    "XLA_FFI_Extension_Base": ("struct_size", "type", "next"),
    "XLA_FFI_Metadata_Extension": ("extension_base", "metadata"),
    "XLA_FFI_Metadata": ("struct_size", "api_version", "traits", "state_type_id"),
    "XLA_FFI_Api_Version": ("struct_size", "extension_start", "major_version", "minor_version"),
    "XLA_FFI_CallFrame": ("struct_size", "extension_start", "api", "ctx", "stage", "args", "rets", "attrs", "future"),
    "XLA_FFI_Args": ("struct_size", "extension_start", "size", "types", "args"),
    "XLA_FFI_Rets": ("struct_size", "extension_start", "size", "types", "rets"),
    "XLA_FFI_Attrs": ("struct_size", "extension_start", "size", "types", "names", "attrs"),
    "XLA_FFI_Buffer": ("struct_size", "extension_start", "dtype", "data", "rank", "dims"),
    "XLA_FFI_Api": (
        "struct_size",
        "extension_start",
        "api_version",
        "internal_api",
        *(
            f"XLA_FFI_{f}"
            for f in (
                "Error_Create Error_GetMessage Error_Destroy Handler_Register Stream_Get Type_Register "
                "ExecutionContext_Get State_Set State_Get DeviceMemory_Allocate DeviceMemory_Free ThreadPool_Schedule "
                "ThreadPool_NumThreads Future_Create Future_SetAvailable Future_SetError RunId_Get DeviceOrdinal_Get"
            ).split()
        ),
    ),
    "XLA_FFI_Error_Destroy_Args": ("struct_size", "extension_start", "error"),
    "XLA_FFI_ThreadPool_Schedule_Args": ("struct_size", "extension_start", "ctx", "task", "data"),
    "XLA_FFI_ThreadPool_NumThreads_Args": ("struct_size", "extension_start", "ctx", "num_threads"),
    "XLA_FFI_Future_Create_Args": ("struct_size", "extension_start", "future"),
    "XLA_FFI_Future_SetAvailable_Args": ("struct_size", "extension_start", "future"),
}
_CONSTANTS = {
    "XLA_FFI_API_MAJOR": FFI_API_VERSION[0],
    "XLA_FFI_API_MINOR": FFI_API_VERSION[1],
    "XLA_FFI_Extension_Metadata": _EXTENSION_METADATA,
    "XLA_FFI_ExecutionStage_EXECUTE": _STAGE_EXECUTE,
}


def header_matches(text: str) -> bool:
    """Whether an FFI C header (``xla/ffi/api/c_api.h``) declares the API version, constants and struct fields
    :func:`_handler` is written against."""
    text = re.sub(r"//[^\n]*", "", text)
    for name, value in _CONSTANTS.items():
        found = re.search(rf"\b{name}\s*=?\s*(\d+)\b", text)
        if found is None or int(found.group(1)) != value:
            return False
    for name, fields in _LAYOUT.items():
        body = re.search(rf"struct {name} {{(.*?)}}", text, re.S)
        if body is None:
            return False
        if tuple(re.findall(r"\w+", d)[-1] for d in body.group(1).split(";") if d.strip()) != fields:
            return False
    return True


@functools.cache
def available() -> bool:
    """Whether :func:`matmul_i8_ffi` can run here: the default backend is the CPU, the FFI header matches the
    handler, and XLA accepted the registration (called once; later calls return the same answer)."""
    if jax.default_backend() != "cpu":
        return False
    try:
        if not header_matches((Path(jax.ffi.include_dir()) / "xla" / "ffi" / "api" / "c_api.h").read_text()):
            return False
    except OSError:
        return False
    new_capsule = ctypes.pythonapi.PyCapsule_New
    new_capsule.restype = ctypes.py_object
    new_capsule.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
    try:
        jax.ffi.register_ffi_target(TARGET, new_capsule(_handler.address, b"xla._CUSTOM_CALL_TARGET", None))
    except Exception:  # noqa: BLE001  (XLA refused the handler: keep XLA's dot)
        return False
    return True


def matmul_i8_ffi(x: jax.Array, w: jax.Array) -> jax.Array:
    """``x @ w.T`` for int8 ``x (R, K)`` and int8 ``w (N, K)`` with exact int32 accumulation, by the Numba
    kernel inside the XLA computation (traceable under ``jax.jit``; needs :func:`available`)."""
    if x.dtype != jnp.int8 or w.dtype != jnp.int8 or x.ndim != 2 or w.ndim != 2 or x.shape[1] != w.shape[1]:
        raise ValueError(f"matmul_i8_ffi needs int8 (R, K) and (N, K), got {x.dtype}{x.shape} and {w.dtype}{w.shape}")
    if x.shape[1] * 2**14 >= 2**31:
        raise ValueError(f"inner dimension {x.shape[1]} could overflow the int32 accumulators")
    return matmul_i8_ffi_scratch(x, w)[0]


def matmul_i8_ffi_scratch(x: jax.Array, w: jax.Array) -> tuple[jax.Array, jax.Array]:
    """:func:`matmul_i8_ffi` without the checks, with the handler's int64 scratch result too (word
    ``_S_PARTS``: how many parts the product was split into; for the tests)."""
    out, scratch = jax.ffi.ffi_call(
        TARGET,
        (jax.ShapeDtypeStruct((x.shape[0], w.shape[0]), jnp.int32), jax.ShapeDtypeStruct((SCRATCH_WORDS,), jnp.int64)),
    )(x, w)
    return out, scratch


def matmul_i8_host(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The same kernel called from numpy (for the equivalence tests): int8 ``x (R, K)``, ``w (N, K)``."""
    x = np.ascontiguousarray(x, np.int8)
    w = np.ascontiguousarray(w, np.int8)
    out = np.empty((x.shape[0], w.shape[0]), np.int32)
    _matmul_rows(x, w, out)
    return out


def matmul_i8_reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The same product in plain numpy (int64 products and sums, then checked to fit int32)."""
    acc = x.astype(np.int64) @ w.astype(np.int64).T
    assert np.all((acc >= -(2**31)) & (acc < 2**31)), "accumulator overflows int32"
    return acc.astype(np.int32)
