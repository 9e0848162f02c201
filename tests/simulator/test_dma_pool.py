"""The DMA bandwidth pool (simulator/dma_pool.py): a transfer held back by earlier bookings names the transfer
whose booking it waited for, also when that booking has left the kept history (``KEEP``) and only the floor
(time before the kept intervals, counted busy) remembers it; a transfer over few engines takes its share of the
bandwidth, not its own duration, from the others."""

from nki_dsl.backends.simulator.dma_pool import KEEP, DmaPool


def _separate_bookings(pool: DmaPool, count: int) -> None:
    # transfer i streams over all 16 engines for 1 ns from 10 * i: disjoint intervals, none merged
    for i in range(count):
        assert pool.book(10.0 * i, 1.0, 16, ident=i) == (10.0 * i, 10.0 * i + 1.0, -1)


def test_a_transfer_waiting_inside_a_booking_names_its_owner():
    pool = DmaPool(16)
    _separate_bookings(pool, 3)
    assert pool.book(10.5, 1.0, 16, ident=99) == (11.0, 12.0, 1)


def test_a_transfer_waiting_on_forgotten_history_names_the_last_forgotten_booking():
    pool = DmaPool(16)
    _separate_bookings(pool, KEEP + 2)  # the two oldest intervals are dropped into the floor
    assert len(pool.starts) == KEEP and pool.floor == 11.0
    # ready at 0, it may not backfill before the floor: it starts where transfer 1's booking ended
    assert pool.book(0.0, 1.0, 16, ident=999) == (11.0, 12.0, 1)


def test_a_transfer_over_few_engines_lasts_its_own_duration_but_holds_only_its_share_of_the_pool():
    pool = DmaPool(16)
    # 100 ns over 4 of the 16 engines: a quarter of the bandwidth, so 25 ns of the pool's time, yet it ends no
    # earlier than its own engines allow
    assert pool.book(5.0, 100.0, 4, ident=0) == (5.0, 105.0, -1)
    # a transfer over all 16 engines ready at the same time waits only for that share
    assert pool.book(5.0, 10.0, 16, ident=1) == (30.0, 40.0, 0)
