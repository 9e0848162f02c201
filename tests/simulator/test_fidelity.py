"""A test per row of benchmarks/fidelity.py: each documented micro-behaviour (reference/nki.md §3.2-§3.4) is
modelled within 10 % of its documented figure, or inside its documented band where only a band is given; and the
NKI matmul tutorial's progression keeps its order, with the mechanisms the benchmark names."""

import pytest

from benchmarks import fidelity

ROWS = {r.name: r for r in fidelity.micro_rows()}


def test_the_rows_cover_the_documented_behaviours():
    names = " | ".join(ROWS)
    for what in ("32 KiB on one engine", "128 B per partition", "512 B per partition", "2 KiB per partition",
                 "8 KiB per partition", "128x128x512 bf16", "fp32 : bf16", "tiny dependent ScalarE", "FP8 double-row",
                 "without double row"):  # fmt: skip
        assert what in names, what


@pytest.mark.parametrize("name", sorted(ROWS))
def test_row_holds(name):
    r = ROWS[name]
    if r.documented is not None:
        assert r.modelled == pytest.approx(r.documented, rel=0.10), r
    if r.band is not None:
        assert r.band[0] <= r.modelled <= r.band[1], r
    assert r.holds


def test_payload_efficiency_rises_with_bytes_per_partition():
    eff = [ROWS[n].modelled for n in sorted((n for n in ROWS if "payload efficiency" in n),
                                            key=lambda n: ROWS[n].band[0])]  # fmt: skip
    assert eff == sorted(eff) and eff[0] < 0.5 < eff[-1]


def test_tutorial_progression_order_and_mechanisms():
    got = dict(fidelity.progression())
    order = ["naive tiled", "hoisted loads", "blocked free dimensions", "fully blocked (16, 2, 8)"]
    latency = [got[n].latency_ns for n in order]
    assert latency == sorted(latency, reverse=True)  # each step of the tutorial is faster
    assert got["naive tiled"].bottleneck == "dma" and got["fully blocked (16, 2, 8)"].bottleneck == "tensor"
    assert got["fully blocked (16, 2, 8)"].tensor_engine_utilisation > 0.85
    # every kernel but the largest blocks moves tiles of 256 B - 1 KiB per partition (2 KiB for the small blocks'
    # rhs), too short to hide the next transfer's fixed cost (§3.4), so it is bound by those fixed costs: at least
    # one fixed cost per transfer, and little more
    t = got["naive tiled"].target
    for name in ("naive tiled", "hoisted loads", "blocked free dimensions", "fully blocked (2, 2, 2)"):
        prof = got[name]
        s = prof.schedule
        n = sum(1 for k in range(len(s)) if s.templates[s.template[k]].engine == "dma")
        assert n * t.dma_fixed_ns <= prof.latency_ns <= 1.05 * n * t.dma_fixed_ns, name
        assert fidelity.mechanism(prof).startswith("DMA-bound by fixed costs"), name
    for name, prof in got.items():
        assert fidelity.mechanism(prof).startswith({"dma": "DMA", "vector": "Vector", "tensor": "Tensor"}
                                                   [prof.bottleneck]), name  # fmt: skip
