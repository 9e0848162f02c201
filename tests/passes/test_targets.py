"""The per-target constants agree with the facts reference/nki.md derives from them (§3.1, §3.4)."""

import dataclasses

import pytest

from nki_dsl.errors import NkiApiError
from nki_dsl.targets import TARGETS, get_target, shared_fact

NAMES = sorted(TARGETS)


@pytest.mark.parametrize("name", NAMES)
def test_tensor_engine_peak_matches_quoted_tflops(name):
    t = get_target(name)
    # one MAC (2 FLOPs) per PE per cycle on a 128x128 array (§3.1 "Check: 128*128*2*2.8 GHz = 91.8 TFLOPS")
    derived = t.pe_rows * t.pe_cols * 2 * t.tensor_ghz * 1e9 / 1e12
    assert derived == pytest.approx(t.quoted_bf16_tflops, rel=0.01)
    assert derived / t.fp32_matmul_slowdown == pytest.approx(t.quoted_fp32_tflops, rel=0.02)


@pytest.mark.parametrize("name", NAMES)
def test_dma_engines_times_per_engine_bandwidth_is_quoted_core_peak(name):
    t = get_target(name)
    assert t.dma_engines * t.dma_engine_bytes_per_ns == pytest.approx(t.quoted_dma_gb_per_s)
    assert t.dma_bytes_per_ns == pytest.approx(t.quoted_dma_gb_per_s)
    # "each DMA engine ... eight SBUF partitions (128 / 16)"
    assert t.dma_partitions_per_engine * t.dma_engines == t.partitions


def test_chosen_trn2_dma_bandwidth_matches_the_measured_transfer():
    # §3.4: "the first DMA engine takes 1416 ns to load 32 KiB" on Trn2; the chosen per-engine figure must predict it
    measured = 32 * 1024 / 1416
    assert get_target("trn2").dma_engine_bytes_per_ns == pytest.approx(measured, rel=0.02)


@pytest.mark.parametrize("name", NAMES)
def test_psum_banks_fill_psum_and_one_bank_holds_512_fp32(name):
    t = get_target(name)
    assert t.psum_banks * t.psum_bank_bytes == t.psum_bytes_per_partition
    assert t.psum_bank_fp32 == 512


@pytest.mark.parametrize(("name", "mib"), [("trn1", 24), ("trn2", 28), ("trn3", 32)])
def test_sbuf_per_core_matches_quoted_total(name, mib):
    t = get_target(name)
    assert t.partitions * t.sbuf_bytes_per_partition == mib * 2**20


def test_cores_per_chip_times_core_peak_is_chip_peak():
    # trn1 chip: "190 FP16/BF16 TFLOPS" for 2 cores (§3.1). The trn2 chip quote (667 for 8 cores) is ~6% above
    # 8 x 78.6 and is not used by the model, so it is not asserted.
    t = get_target("trn1")
    assert t.cores_per_chip * t.pe_rows * t.pe_cols * 2 * t.tensor_ghz / 1e3 == pytest.approx(190, rel=0.04)


def test_hbm_per_core_is_derived_from_the_chip():
    assert get_target("trn1").hbm_bytes_per_ns_per_core == pytest.approx(410)
    assert get_target("trn2").hbm_bytes_per_ns_per_core == pytest.approx(362.5)


def test_unknown_target_names_the_valid_ones():
    with pytest.raises(NkiApiError, match="trn1, trn2, trn3"):
        get_target("trn9")
    assert get_target(TARGETS["trn1"]) is TARGETS["trn1"]
    with pytest.raises(ValueError, match="no clock"):
        get_target("trn2").clock_ghz("sync")


@pytest.mark.parametrize("name", NAMES)
def test_tile_limits_are_nkis_tile_size(name):
    # §1.2 TC#1-#3 and the tile_size list: pmax 128, psum_fmax 512, gemm_stationary_fmax 128, gemm_moving_fmax 512,
    # bn_stats_fmax 512, 8 PSUM banks; an access pattern has a partition axis and up to four free axes
    t = get_target(name)
    limits = (t.partitions, t.psum_bank_fp32, t.gemm_stationary_fmax, t.gemm_moving_fmax, t.bn_stats_fmax, t.psum_banks)
    assert limits == (128, 512, 128, 512, 512, 8)
    assert t.max_tile_rank == 5 and t.vector_transpose_max == 32


def test_shared_facts_are_those_every_target_agrees_on():
    assert shared_fact("partitions") == 128 and shared_fact("bn_stats_fmax") == 512
    with pytest.raises(ValueError, match="sbuf_bytes_per_partition differs between targets"):
        shared_fact("sbuf_bytes_per_partition")


def test_equal_targets_are_one_cache_key():
    t = get_target("trn2")
    assert {t: 1}[dataclasses.replace(t)] == 1
    assert dataclasses.replace(t, partitions=64) != t and repr(t) == "<Target trn2>"
