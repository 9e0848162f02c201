"""Op table entries for ``nki.isa`` (nisa) engine instructions. Each names the engine it runs on."""

from __future__ import annotations

from nki_dsl.ir.ops.spec import OpSpec

ISA_OPS: list[OpSpec] = []
