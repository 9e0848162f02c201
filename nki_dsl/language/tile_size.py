"""``nl.tile_size``: the hardware tile limits of the target a kernel is traced for (reference/nki.md §1.2, §2.7
"nki.language" tile_size), read from the target table (``nki_dsl/targets.py``), never repeated here.

Inside a kernel each read is recorded as a fact the trace depends on (``Builder.target_fact``): a trace that read
``tile_size.total_available_sbuf_size`` is traced again for a target with a different SBUF, while one that read
only ``pmax`` (128 on every target) is shared by all. Read outside a kernel, a limit is that of the target a
user-facing call runs on when it names none (``DEFAULT_TARGET``), as for ``nisa.get_nc_version()``.
"""

from nki_dsl.targets import DEFAULT_TARGET, get_target
from nki_dsl.trace import builder as _builder

# NKI's name -> the Target attribute that holds it
_FIELDS = {
    "pmax": "partitions",  # §1.2 TC#1
    "psum_fmax": "psum_bank_fp32",  # §1.2 TC#2 (the legacy name of psum_bank_fmax)
    "psum_bank_fmax": "psum_bank_fp32",
    "psum_num_banks": "psum_banks",  # §1.1
    "gemm_stationary_fmax": "gemm_stationary_fmax",  # §1.2 TC#3
    "gemm_moving_fmax": "gemm_moving_fmax",  # §1.2 TC#3
    "bn_stats_fmax": "bn_stats_fmax",  # §1.2
    "psum_min_align": "psum_min_align",  # §1.2: undocumented, assumed
    "sbuf_min_align": "sbuf_min_align",
    "total_available_sbuf_size": "sbuf_bytes_per_partition",  # bytes per partition (§1.1, §2.7)
}


def __getattr__(name: str):
    field = _FIELDS.get(name)
    if field is None:
        raise AttributeError(f"nl.tile_size has no limit {name!r}; it has {', '.join(_FIELDS)}")
    if _builder.is_tracing():
        return _builder.current(f"nl.tile_size.{name}").target_fact(field)
    return getattr(get_target(DEFAULT_TARGET), field)


def __dir__() -> list[str]:
    return sorted(_FIELDS)
