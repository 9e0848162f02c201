"""Run every numbered lesson in order: the project's main job, end to end."""

import pathlib
import runpy
import sys
import time

HERE = pathlib.Path(__file__).parent


def lessons() -> list[pathlib.Path]:
    return sorted(p for p in HERE.glob("[0-9][0-9]_*.py"))


def main() -> int:
    for path in lessons():
        print(f"\n=== {path.name} " + "=" * max(0, 70 - len(path.name)))
        start = time.perf_counter()
        runpy.run_path(str(path), run_name="__main__")
        print(f"--- {path.name} done in {time.perf_counter() - start:.2f} s")
    print(f"\nall {len(lessons())} lessons ran and matched NumPy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
