"""What a shape family costs a loader, against the concrete IR it replaces, in one run.

    python benchmarks/family_load.py [--repeat 5] [--no-library]

For softmax (``N x 512:float32``, N in 1..65536), vit-attn (``B x 197 x 2304:bfloat16``, B in 1..256) and linear's
fused kernels (mlp, layernorm_mlp, layernorm_qkv at ViT-B/16's widths, ``M x 768``): the time to
prove the family (publish time, once), to parse the family text (once per process), and per concrete shape to
instantiate and verify it (the first call of each shape), beside ``nki.parse_ir`` of the concrete IR of the same
shape (what a pre-traced specialisation costs its first call). Prints the median CPU times (``time.process_time``:
on a shared machine wall times float with the load) and the ratio instantiate+verify / parse_ir: a family's first
call of a shape should cost no more than loading that shape's IR would. Then, unless ``--no-library``, every
family of every library manifest (``kernels/*/kernel.toml``) with its trace+prove CPU time.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import nki_dsl as nki  # noqa: E402
from benchmarks.timing import median_time  # noqa: E402
from kernels.linear.launcher import plan_layernorm_mlp, plan_layernorm_qkv, plan_mlp  # noqa: E402
from kernels.softmax.launcher import plan_softmax  # noqa: E402
from kernels.vit_attn.launcher import plan_attention_qkv  # noqa: E402


class _Arg:
    def __init__(self, spec, shape):
        self.spec, self.shape, self.ndim = spec, shape, len(shape)
        self.dtype = nki.language.bfloat16 if spec.dtype == "bfloat16" else np.dtype(spec.dtype)


def _case(name, plan, shapes, dtype, dims, constants, value, repeat):
    """``shapes``: every argument's shape (the symbols those of ``dims``); ``value``: the size every symbol takes."""
    specs = [nki.spec(shape, dtype, dims={d: dims[d] for d in shape if isinstance(d, str)}) for shape in shapes]
    launch, _, kwargs = plan(*[_Arg(s, shape) for s, shape in zip(specs, nki.symbolic_shapes(*specs))], **constants)
    t = time.process_time()
    family = nki.trace(launch, *specs, target="trn2", **kwargs)  # traces and proves
    prove = time.process_time() - t
    text = family.text
    parse = median_time(lambda: nki.parse_family(text), repeat, time.process_time)
    concrete_shapes = [tuple(value if isinstance(s, str) else s for s in shape) for shape in shapes]
    instance = median_time(lambda: nki.parse_family(text).instantiate(*concrete_shapes, target="trn2"), repeat,
                           time.process_time) - parse  # fmt: skip
    np_dtype = nki.language.bfloat16 if dtype == "bfloat16" else dtype
    claunch, cargs, ckw = plan(*[np.zeros(s, np_dtype) for s in concrete_shapes], **constants)
    concrete_text = nki.trace(claunch, *[nki.spec(a.shape, dtype) for a in cargs], target="trn2", **ckw).text
    concrete = median_time(lambda: nki.parse_ir(concrete_text, target="trn2"), repeat, time.process_time)
    print(f"{name}: trace+prove {prove * 1e3:.0f} ms (once, at publish); parse_family {parse * 1e3:.1f} ms; "
          f"instantiate+verify at {concrete_shapes[0]} {instance * 1e3:.1f} ms vs parse_ir of that shape's IR "
          f"{concrete * 1e3:.1f} ms: ratio {instance / concrete:.2f}")  # fmt: skip


def _library() -> None:
    """Every family of every library manifest (kernels/*/kernel.toml): the CPU time to trace it through the
    package's own launcher and prove it for its whole range (what publishing it costs, once)."""
    from hub_client.bundle import _FamilyArg, _function, _import_package
    from hub_client.package import describe_dim, read_package

    root = Path(__file__).resolve().parents[1] / "kernels"
    total = 0.0
    for toml in sorted(root.glob("*/kernel.toml")):
        pkg = read_package(toml.parent)
        module = _import_package(pkg)
        for ep in pkg.entry_points:
            plan = _function(module, ep.plan, pkg)
            for spec in ep.specialisations:
                if not spec.dims:
                    continue
                ranges = {n: (lo, hi, step) for n, lo, hi, step in spec.dims}
                specs = [nki.spec(a.shape, a.dtype, dims={s: ranges[s] for s in a.symbols}) for a in spec.args]
                args = [_FamilyArg(s, shape) for s, shape in zip(specs, nki.symbolic_shapes(*specs))]
                launch, passed, kwargs = plan(*args, **dict(spec.constants))
                passed = [a.spec if isinstance(a, _FamilyArg) else a for a in passed]
                t = time.process_time()
                nki.trace(launch, *passed, target="trn2", **kwargs)
                took = time.process_time() - t
                total += took
                dims = ", ".join(describe_dim(*d) for d in spec.dims)
                consts = "".join(f" {k}={v}" for k, v in spec.constants)
                print(f"  {pkg.name}.{ep.name}({', '.join(map(str, spec.args))}){consts} with {dims}: "
                      f"{took * 1e3:.0f} ms")  # fmt: skip
    print(f"every library family traced and proved in {total:.1f} s of CPU")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-library", action="store_true", help="skip the per-family proof times of kernels/*")
    opts = ap.parse_args()
    repeat = opts.repeat
    _case("softmax", plan_softmax, [("N", 512)], "float32", {"N": (1, 65536)}, {}, 300, repeat)
    _case("vit-attn qkv", plan_attention_qkv, [("B", 197, 2304)], "bfloat16", {"B": (1, 256)}, {"num_heads": 12}, 8,
          repeat)  # fmt: skip
    # linear's fused kernels at ViT-B/16's widths: the row counts of batch 8 (1576) and 16 (3152), each in the family
    # of kernel.toml that holds it
    _case("linear mlp", plan_mlp, [("M", 768), (768, 3072), (3072,), (3072, 768), (768,), ("M", 768)], "bfloat16",
          {"M": (513, 65536)}, {}, 1576, repeat)  # fmt: skip
    _case("linear layernorm_mlp", plan_layernorm_mlp, [("M", 768), (768,), (768,), (768, 3072), (3072,), (3072, 768),
          (768,)], "bfloat16", {"M": (1537, 2048)}, {"epsilon": 1e-6}, 1576, repeat)  # fmt: skip
    _case("linear layernorm_qkv", plan_layernorm_qkv, [("M", 768), (768,), (768,), (768, 2304), (2304,)], "bfloat16",
          {"M": (2049, 65536)}, {"scale": 0.125, "epsilon": 1e-6}, 3152, repeat)  # fmt: skip
    if not opts.no_library:
        _library()


if __name__ == "__main__":
    main()
