"""The dtype names of the current ``nki.language`` (reference/nki.md §2.7 "dtypes").

``float8_e4m3fn`` (no infinities) is the storage this project already uses for legacy ``float8_e4m3``
(``nki_dsl/dtypes.py``), so both names are the one IR dtype ``float8_e4m3``. ``float8_e8m0fnu`` (the MX scale) is
ml_dtypes' type. The packed MX types (``float8_e4m3fn_x4``, ``float8_e5m2_x4``: 32-bit elements holding 4 fp8;
``float4_e2m1fn_x4``: 16-bit elements holding 4 fp4) have no ml_dtypes type: each is a distinct one-field NumPy
dtype of its width (``nki_dsl/dtypes.py`` ``_packed``), so shapes count packed elements and ``itemsize`` is the
element's bytes."""

from nki_dsl import dtypes as _dtypes

float32 = _dtypes.get("float32").np_dtype
bfloat16 = _dtypes.get("bfloat16").np_dtype
float16 = _dtypes.get("float16").np_dtype
tfloat32 = _dtypes.get("float32").np_dtype
float8_e4m3 = _dtypes.get("float8_e4m3").np_dtype
float8_e4m3fn = float8_e4m3
float8_e5m2 = _dtypes.get("float8_e5m2").np_dtype
float8_e8m0fnu = _dtypes.get("float8_e8m0fnu").np_dtype
float8_e4m3fn_x4 = _dtypes.get("float8_e4m3fn_x4").user_dtype
float8_e5m2_x4 = _dtypes.get("float8_e5m2_x4").user_dtype
float4_e2m1fn_x4 = _dtypes.get("float4_e2m1fn_x4").user_dtype
int32 = _dtypes.get("int32").np_dtype
int16 = _dtypes.get("int16").np_dtype
int8 = _dtypes.get("int8").np_dtype
uint32 = _dtypes.get("uint32").np_dtype
uint16 = _dtypes.get("uint16").np_dtype
uint8 = _dtypes.get("uint8").np_dtype
bool_ = _dtypes.get("bool_").np_dtype

DTYPE_NAMES = [
    "float32", "bfloat16", "float16", "tfloat32", "float8_e4m3", "float8_e4m3fn", "float8_e5m2",
    "float8_e8m0fnu", "float8_e4m3fn_x4", "float8_e5m2_x4", "float4_e2m1fn_x4",
    "int32", "int16", "int8", "uint32", "uint16", "uint8", "bool_",
]  # fmt: skip
__all__ = DTYPE_NAMES
