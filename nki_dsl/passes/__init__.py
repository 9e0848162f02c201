"""Passes over kernel IR: rules as data applied by one rewrite engine (``rewrite``), run as a flat named pipeline
(``pipeline``): ``lower-language`` turns nl ops into engine instructions; ``allocate`` then places on-chip tensors."""

from nki_dsl.passes.pipeline import PIPELINE, NkiPassError, compile_for_target, run_pipeline

__all__ = ["PIPELINE", "NkiPassError", "compile_for_target", "run_pipeline"]
