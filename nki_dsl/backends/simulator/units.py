"""The timelines the simulator schedules onto: the four compute engines, each with its own instruction queue
(reference/nki.md §1.1), and the DMA queues (``Target.dma_queues_per_engine`` of them). Which engine runs an op
is decided by lowering (``nki_dsl.passes.engines.engine_of``), not here."""

ENGINES = ("tensor", "vector", "scalar", "gpsimd")
DMA = "dma"
