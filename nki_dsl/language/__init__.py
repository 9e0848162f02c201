"""``nki_dsl.language`` (``nl``): tiles, memory, math and loops, in the style of legacy ``neuronxcc.nki.language``."""

from nki_dsl import dtypes as _dtypes
from nki_dsl.language import tile_size
from nki_dsl.language.buffers import hbm, par_dim, private_hbm, psum, sbuf, shared_hbm
from nki_dsl.language.casting import static_cast
from nki_dsl.language.composite import rms_norm, softmax
from nki_dsl.language.constants import shared_constant
from nki_dsl.language.creation import empty_like, full, full_like, ndarray, ones, ones_like, zeros, zeros_like
from nki_dsl.language.debug import device_print
from nki_dsl.language.finfo import finfo
from nki_dsl.language.iterators import affine_range, sequential_range, static_range
from nki_dsl.language.legacy_builtins import all_reduce, atomic_rmw, gather_flattened, shared_identity_matrix
from nki_dsl.language.loop_reduce import loop_reduce
from nki_dsl.language.math import *  # noqa: F403 - the generated elementwise/reduction ops
from nki_dsl.language.math import dropout, matmul, random_seed, where
from nki_dsl.language.memory import broadcast_to, copy, expand_dims, load, load_transpose2d, store, transpose
from nki_dsl.language.random import rand
from nki_dsl.language.spmd import nc, num_programs, program_id, program_ndim, spmd_dim
from nki_dsl.trace.index import MGrid as _MGrid
from nki_dsl.trace.index import arange, ds

mgrid = _MGrid()

float32 = _dtypes.get("float32").np_dtype
bfloat16 = _dtypes.get("bfloat16").np_dtype
float16 = _dtypes.get("float16").np_dtype
tfloat32 = _dtypes.get("float32").np_dtype
float8_e4m3 = _dtypes.get("float8_e4m3").np_dtype
float8_e5m2 = _dtypes.get("float8_e5m2").np_dtype
int32 = _dtypes.get("int32").np_dtype
int16 = _dtypes.get("int16").np_dtype
int8 = _dtypes.get("int8").np_dtype
uint32 = _dtypes.get("uint32").np_dtype
uint16 = _dtypes.get("uint16").np_dtype
uint8 = _dtypes.get("uint8").np_dtype
bool_ = _dtypes.get("bool_").np_dtype

fp32 = _dtypes.FloatLimits("float32")
bf16 = _dtypes.FloatLimits("bfloat16")
bfp16 = bf16
fp16 = _dtypes.FloatLimits("float16")
