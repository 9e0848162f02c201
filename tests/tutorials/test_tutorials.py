"""Every numbered lesson runs to completion (each asserts its own results against NumPy)."""

import pathlib
import runpy

import pytest

LESSONS = sorted((pathlib.Path(__file__).parents[2] / "tutorials").glob("[0-9][0-9]_*.py"))


def test_lessons_exist():
    assert [p.name[:2] for p in LESSONS] == [f"{k:02d}" for k in range(1, len(LESSONS) + 1)]


@pytest.mark.parametrize("lesson", LESSONS, ids=[p.stem for p in LESSONS])
def test_lesson_runs(lesson, capsys):
    runpy.run_path(str(lesson), run_name="__main__")
    assert capsys.readouterr().out.strip(), "a lesson prints what it shows"
