"""Every numbered lesson runs to completion (each asserts its own results against NumPy)."""

import pathlib
import runpy

import pytest

from tests.backend_fixture import backend_independent, slow_on_jax

LESSONS = sorted((pathlib.Path(__file__).parents[2] / "tutorials").glob("[0-9][0-9]_*.py"))
# Lessons that launch no kernel the plain way (they profile on the simulator): one run each, held to it by
# ``backend_independent``. Lessons whose Hub kernels and launchers run ViT-sized attention take XLA seconds to
# compile: their JAX runs are slow-marked.
ONE_BACKEND = {"04_profiling"}
SLOW_ON_JAX = {"05_publish_and_load", "06_vit_attention"}
EVERY_BACKEND = [p for p in LESSONS if p.stem not in ONE_BACKEND | SLOW_ON_JAX]
ONCE = [p for p in LESSONS if p.stem in ONE_BACKEND]
HEAVY = [p for p in LESSONS if p.stem in SLOW_ON_JAX]


@backend_independent
def test_lessons_exist():
    assert [p.name[:2] for p in LESSONS] == [f"{k:02d}" for k in range(1, len(LESSONS) + 1)]
    assert {p.stem for p in ONCE} == ONE_BACKEND and {p.stem for p in HEAVY} == SLOW_ON_JAX  # none silently dropped


def _runs(lesson, capsys):
    runpy.run_path(str(lesson), run_name="__main__")
    assert capsys.readouterr().out.strip(), "a lesson prints what it shows"


@pytest.mark.parametrize("lesson", EVERY_BACKEND, ids=[p.stem for p in EVERY_BACKEND])
def test_lesson_runs(lesson, capsys):
    _runs(lesson, capsys)


@pytest.mark.parametrize("lesson", ONCE, ids=[p.stem for p in ONCE])
@backend_independent
def test_lesson_runs_on_one_backend(lesson, capsys):
    _runs(lesson, capsys)


@pytest.mark.parametrize("lesson", HEAVY, ids=[p.stem for p in HEAVY])
@slow_on_jax
def test_heavy_lesson_runs(lesson, capsys):
    _runs(lesson, capsys)
