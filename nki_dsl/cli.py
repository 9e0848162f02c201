"""The ``nki`` command line: ``trace``, ``check``, ``run``, ``asm`` and ``profile`` kernels from files.

    nki trace FILE.py:KERNEL --arg a=256x1024:float16 --arg b=256x1024:float16 --grid 2,2
    nki asm FILE.py:KERNEL --arg lhsT=512x512:float32 --arg rhs=512x512:float32 --target trn2
    nki profile FILE.py:KERNEL --arg lhsT=4096x4096:bfloat16 --arg rhs=4096x8192:bfloat16 --timing-only \
        --target trn2 --trace matmul.json
    nki check FILE.nkir
    nki run FILE.py:KERNEL --arg a=256x1024:float16 --reference FILE.py:FUNCTION
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import sys

import numpy as np

import nki_dsl as nki
from nki_dsl import dtypes
from nki_dsl.errors import NkiError
from nki_dsl.ir.budget import IRBudget
from nki_dsl.profiling import benchmark_profile
from nki_dsl.targets import DEFAULT_TARGET, TARGETS, get_target
from nki_dsl.trace.jit import as_launch
from nki_dsl.trace.specs import ArgSpec, spec


def _console():
    from rich.console import Console

    return Console(highlight=False)


def load_object(ref: str):
    """``path/to/file.py:NAME`` -> the object NAME defined in that file."""
    path, sep, name = ref.rpartition(":")
    if not sep or not path:
        raise SystemExit(f"expected FILE.py:NAME, got {ref!r}")
    if not os.path.isfile(path):
        raise SystemExit(f"no such file: {path}")
    module_name = "_nki_cli_" + os.path.splitext(os.path.basename(path))[0]
    module = sys.modules.get(module_name)
    if module is None or getattr(module, "__file__", None) != os.path.abspath(path):
        spec = importlib.util.spec_from_file_location(module_name, os.path.abspath(path))
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    if not hasattr(module, name):
        defined = ", ".join(n for n in vars(module) if not n.startswith("_"))
        raise SystemExit(f"{path} defines no {name!r}; it defines: {defined}")
    return getattr(module, name)


def parse_arg(text: str, ranges: dict | None = None):
    """``name=256x1024:float16`` (a tensor spec), ``name=Nx1024:float16`` with ``N`` in ``ranges`` (a shape family's
    argument, ``--dim N=1..65536``) or ``name=<python literal>`` (a compile-time constant)."""
    ranges = ranges or {}
    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier():
        raise SystemExit(f"--arg expects NAME=SHAPE:DTYPE or NAME=VALUE, got {text!r}")
    shape_text, colon, dtype = value.partition(":")
    dims = shape_text.split("x")
    if colon and all(d.strip().isdigit() or d.strip() in ranges for d in dims):
        shape = tuple(int(d) if d.strip().isdigit() else d.strip() for d in dims)
        return name, spec(shape, dtype, dims={d: ranges[d] for d in shape if isinstance(d, str)})
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        message = f"--arg {name}: {value!r} is neither SHAPE:DTYPE (e.g. 128x512:float32) nor a literal"
        raise SystemExit(message) from None


def parse_dims(texts: list[str]) -> dict[str, tuple[int, ...]]:
    """``--dim N=1..65536``: a shape family's symbolic dimension and its inclusive range; ``--dim M=128..4096:128``
    takes the multiples of 128 only (``nki.spec``'s ``(lo, hi, step)``)."""
    out = {}
    for text in texts:
        name, sep, value = text.partition("=")
        value, colon, step = value.partition(":")
        lo, dots, hi = value.partition("..")
        parts = (lo, hi, step) if colon else (lo, hi)
        if not (sep and dots and name.isidentifier() and all(p.strip().isdigit() for p in parts)):
            raise SystemExit(f"--dim expects NAME=LO..HI (or NAME=LO..HI:STEP) such as N=1..65536, got {text!r}")
        out[name] = tuple(int(p) for p in parts)
    return out


def parse_grid(text: str | None) -> tuple[int, ...]:
    if not text:
        return ()
    try:
        return tuple(int(g) for g in text.split(","))
    except ValueError:
        raise SystemExit(f"--grid expects comma-separated ints such as 2,2, got {text!r}") from None


def _launch(kernel_ref: str, grid: tuple[int, ...]):
    kernel = load_object(kernel_ref)
    launch = as_launch(kernel)
    return launch.jit[grid] if grid else launch


def cmd_trace(args) -> int:
    launch = _launch(args.kernel, parse_grid(args.grid))
    ranges = parse_dims(args.dim)
    kwargs = dict(parse_arg(a, ranges) for a in args.arg)
    traced = nki.trace(launch, target=args.target, **kwargs)  # with --dim: a shape family, proved for its range
    print(traced.text, end="")
    return 0


def cmd_asm(args) -> int:
    """The engine-instruction listing: trace, then lower and allocate for the target as the simulator does."""
    # deferred: `import nki_dsl` does not load the compiler passes, parser or verifier; commands that need them do
    from nki_dsl.passes import compile_for_target
    from nki_dsl.passes.listing import listing

    launch = _launch(args.kernel, parse_grid(args.grid))
    kwargs = dict(parse_arg(a) for a in args.arg)
    lowered, allocation = compile_for_target(nki.trace(launch, target=args.target, **kwargs).ir, args.target)
    print(listing(lowered, allocation), end="")
    return 0


def cmd_profile(args) -> int:
    """Modelled timing on the engine simulator: random inputs (numbers and timing), or ``--timing-only`` from
    the shapes alone; prints the Profile summary and optionally writes the Chrome trace."""
    console = _console()
    launch = _launch(args.kernel, parse_grid(args.grid))
    kwargs = dict(parse_arg(a) for a in args.arg)
    if args.timing_only:
        prof = benchmark_profile(launch, target=args.target, **kwargs)
    else:
        kwargs = _random_inputs(kwargs, args.seed)
        outputs, prof = nki.simulate(launch, target=args.target, **kwargs)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        shown = ", ".join(f"{o.dtype}{list(o.shape)}" for o in outputs if o is not None)
        console.print(f"outputs (random inputs, seed {args.seed}): {shown}", soft_wrap=True)
    prof.summary(console=console)
    if args.trace:
        prof.save_trace(args.trace)
        console.print(f"Chrome trace written to {args.trace} (open in https://ui.perfetto.dev or chrome://tracing)",
                      soft_wrap=True)  # fmt: skip
    return 0


def cmd_check(args) -> int:
    from rich.markup import escape

    # deferred: `import nki_dsl` does not load the compiler passes, parser or verifier; commands that need them do
    from nki_dsl.ir.parser import parse_kernel
    from nki_dsl.passes.verifier import prove, verify_kernel

    console = _console()
    with open(args.file, encoding="utf-8") as f:
        text = f.read()
    budget = IRBudget()  # an .nkir file is untrusted input: the same budgets as nki.parse_ir
    kernel = parse_kernel(text, args.file, budget)
    if kernel.symbols:  # a shape family: every rule proved for its whole range, as publishing does
        diagnostics = prove(kernel, args.target, budget)
    else:
        diagnostics = verify_kernel(kernel, target=args.target, budget=budget)
    for d in diagnostics:
        # error[rule]: as compilers print error codes; the text is escaped, since IR shapes look like markup
        console.print(f"[bold red]error[/]{escape(f'[{d.rule}]: {d}')}", soft_wrap=True)
    if diagnostics:
        console.print(f"{escape(args.file)}: {len(diagnostics)} error(s)", soft_wrap=True)
        return 1
    valid = f"kernel {kernel.name} is valid for {args.target.name}"
    if kernel.symbols:
        dims = ", ".join(s.describe() for s in kernel.symbols.values() if s.is_base)
        valid = f"shape family {kernel.name} is valid for {args.target.name} at every size ({dims})"
    console.print(f"[green]ok[/]: {escape(args.file)}: {valid}", soft_wrap=True)
    return 0


def _random_array(spec, rng) -> np.ndarray:
    d = dtypes.get(spec.dtype)
    if d.is_float:
        return rng.standard_normal(spec.shape).astype(np.float32).astype(d.np_dtype)
    if d.kind == "bool":
        return rng.integers(0, 2, spec.shape).astype(bool)
    return rng.integers(-8 if d.kind == "int" else 0, 8, spec.shape).astype(d.np_dtype)


def _random_inputs(kwargs: dict, seed: int) -> dict:
    """``kwargs`` with every tensor spec replaced by a random array of its shape and dtype (constants kept)."""
    rng = np.random.default_rng(seed)
    return {k: _random_array(v, rng) if isinstance(v, ArgSpec) else v for k, v in kwargs.items()}


def cmd_run(args) -> int:
    from rich.table import Table

    console = _console()
    launch = _launch(args.kernel, parse_grid(args.grid))
    kwargs = _random_inputs(dict(parse_arg(a) for a in args.arg), args.seed)
    backend = nki.default_backend() if args.backend is None else args.backend  # the inputs are NumPy arrays
    outputs = launch(**kwargs, backend=backend)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    where = "the NumPy reference" if backend == "numpy" else f"the {backend} backend"
    table = Table(title=f"{args.kernel} on {where}")
    for col in ("output", "shape", "dtype", "max |err|", "status"):
        table.add_column(col)
    failed = False
    expected = None
    if args.reference:
        expected = load_object(args.reference)(**{k: v for k, v in kwargs.items()})
        expected = expected if isinstance(expected, tuple) else (expected,)
    for k, out in enumerate(outputs):
        if out is None:
            continue
        err, status = "-", "ran"
        if expected is not None:
            ref = np.asarray(expected[k], dtype=np.float32)
            got = np.asarray(out, dtype=np.float32)
            if got.shape != ref.shape:
                failed, err, status = True, f"reference shape {list(ref.shape)}", "[red]MISMATCH[/]"
            else:
                err_value = float(np.max(np.abs(got - ref))) if got.size else 0.0
                ok = bool(np.allclose(got, ref, rtol=args.rtol, atol=args.atol))
                failed |= not ok
                err, status = f"{err_value:.3g}", "[green]match[/]" if ok else "[red]MISMATCH[/]"
        table.add_row(str(k), str(list(out.shape)), str(out.dtype), err, status)
    console.print(table)
    return 1 if failed else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nki", description="Trace, check, run and profile NKI-style kernels.")
    sub = parser.add_subparsers(dest="command", required=True)

    def kernel_command(name, help_text):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("kernel", help="FILE.py:KERNEL")
        p.add_argument("--arg", action="append", default=[], help="NAME=SHAPE:DTYPE or NAME=VALUE (repeatable)")
        p.add_argument("--grid", help="SPMD launch grid, e.g. 2,2")
        p.add_argument("--target", default=DEFAULT_TARGET, choices=tuple(TARGETS))
        return p

    trace = kernel_command("trace", "print a kernel's verified IR")
    trace.set_defaults(func=cmd_trace)
    trace.add_argument("--dim", action="append", default=[],
                       help="NAME=LO..HI or NAME=LO..HI:STEP (multiples of STEP): a symbolic dimension of a shape "
                            "family, used in --arg as NAMEx512:float32")
    kernel_command("asm", "print the engine-instruction listing for a target").set_defaults(func=cmd_asm)
    prof = kernel_command("profile", "modelled latency, engine busy time and roofline on the engine simulator")
    prof.add_argument("--trace", help="write the timeline as Chrome-trace JSON (Perfetto) to this path")
    prof.add_argument("--timing-only", action="store_true", help="shapes only: no data, for sizes too large to run")
    prof.add_argument("--seed", type=int, default=0, help="seed of the random inputs (numbers-and-timing mode)")
    prof.set_defaults(func=cmd_profile)
    check = sub.add_parser("check", help="parse and verify IR text")
    check.add_argument("file", help="an .nkir file")
    check.add_argument("--target", default=DEFAULT_TARGET, choices=tuple(TARGETS))
    check.set_defaults(func=cmd_check)
    run = kernel_command("run", "run a kernel on random inputs, optionally against a reference")
    run.add_argument("--reference", help="FILE.py:FUNCTION taking the same arguments as NumPy arrays")
    run.add_argument("--backend", default=None, choices=tuple(nki.backend_names()),
                     help="the backend the kernel runs on (default: $NKI_BACKEND, else numpy, the reference)")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--rtol", type=float, default=1e-2)
    run.add_argument("--atol", type=float, default=1e-2)
    run.set_defaults(func=cmd_run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.target = get_target(args.target)  # the one place the command line's target name becomes a Target
    try:
        return args.func(args)
    except NkiError as e:
        from rich.markup import escape

        _console().print(f"[bold red]error[/]: {escape(str(e))}", soft_wrap=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
