"""``nki check FILE.nkir``: parsed IR goes through the verifier; each broken rule is printed with its id."""

import subprocess
import sys

from nki_dsl.cli import main

BAD = """\
kernel k(%a: f32[256, 512] hbm) -> (%0) {
  grid ()
  source "k.py"
  %0 = alloc() : f32[128, 512] shared_hbm loc(3)
  affine i0 = range(0, 3, 1) loc(4) {
    %1 = nl.load(src=%a[d0 + 128*i0, d1 ; 128x512]) : f32[128, 512] sbuf loc(5)
    %2 = nl.exp(x=%a[d0, d1 ; 128x512]) : f32[128, 512] sbuf loc(6)
  }
}
"""

GOOD = """\
kernel k(%a: f32[256, 512] hbm) -> (%0) {
  grid ()
  source "k.py"
  %0 = alloc() : f32[256, 512] shared_hbm loc(3)
  affine i0 = range(0, 2, 1) loc(4) {
    %1 = nl.load(src=%a[d0 + 128*i0, d1 ; 128x512]) : f32[128, 512] sbuf loc(5)
    nl.store(dst=%0[d0 + 128*i0, d1 ; 128x512], value=%1) loc(6)
  }
}
"""


def test_each_diagnostic_is_printed_with_its_rule_and_the_exit_code_is_1(tmp_path, capsys):
    path = tmp_path / "bad.nkir"
    path.write_text(BAD)
    assert main(["check", str(path)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "error[output-written]: k.py:3: alloc: output %0 f32[128, 512] in 'shared_hbm' is never written; store the "
        "result into it with nl.store(out[...], value=...)",
        "error[out-of-bounds]: k.py:5: nl.load: out-of-bound access for tensor %a f32[256, 512] on dimension 0: "
        "index range [0, 383] exceeds dimension size of 256; the index is d0 + 128*i0 with i0 in [0, 2] from the "
        "affine_range loop at line 4 (operand 'src' %a[128, 512] in 'hbm'); fix the loop bounds or restrict the op "
        "to the valid elements with mask=",
        "error[operand-buffer]: k.py:6: nl.exp: operand 'x' %a[128, 512] is in 'hbm'; expected 'sbuf' or 'psum' "
        "(nl.load it into SBUF first)",
        f"{path}: 3 error(s)",
    ]


def test_a_valid_file_exits_0(tmp_path, capsys):
    path = tmp_path / "good.nkir"
    path.write_text(GOOD)
    assert main(["check", str(path)]) == 0
    assert capsys.readouterr().out == f"ok: {path}: kernel k is valid for trn2\n"


def test_the_target_decides_capacity_rules(tmp_path, capsys):
    # Three live tiles of 70 KiB per partition: 210 KiB fits trn2's 224 KiB, not trn1's 192 KiB (each alone
    # fits both, so no budget refuses it first).
    text = GOOD.replace("  affine", "  %w = nl.full() {value = 0.0} : f32[128, 17920] sbuf loc(3)\n"
                        "  %v = nl.full() {value = 1.0} : f32[128, 17920] sbuf loc(3)\n"
                        "  %x = nl.add(x=%w, y=%v) : f32[128, 17920] sbuf loc(3)\n  affine")
    path = tmp_path / "wide.nkir"
    path.write_text(text)
    assert main(["check", str(path), "--target", "trn2"]) == 0
    assert main(["check", str(path), "--target", "trn1"]) == 1
    assert "error[sbuf-capacity]: " in capsys.readouterr().out


def test_a_syntax_error_is_reported_without_a_traceback(tmp_path):
    path = tmp_path / "broken.nkir"
    path.write_text(BAD.replace("%1 = nl.load(", "%1 = nl.load[", 1))
    run = subprocess.run([sys.executable, "-m", "nki_dsl", "check", str(path)], capture_output=True, text=True)
    assert run.returncode == 1
    assert run.stdout.startswith("error: ") and "Traceback" not in run.stderr, (run.stdout, run.stderr)


def test_check_applies_the_default_budgets(tmp_path, capsys):
    # A loop of 2^30 iterations verifies under every hardware rule; only the iteration-space budget refuses it.
    path = tmp_path / "huge.nkir"
    path.write_text(GOOD.replace("range(0, 2, 1)", "range(0, 1073741824, 1)").replace(
        "f32[256, 512] hbm", "f32[140737488355328, 512] hbm").replace(
        "f32[256, 512] shared_hbm", "f32[140737488355328, 512] shared_hbm"))
    assert main(["check", str(path)]) == 1
    assert "error[budget]: " in capsys.readouterr().out
