"""The command line's output: wrapped on a terminal, whole lines in a pipe or a file."""

from __future__ import annotations

import io
import subprocess
import sys

from dealtrail.cli.common import PipeConsole

LINE = "T1  seq 1200  events 1200  " + "ab12" * 16 + "  " + "word " * 30


def test_a_long_line_printed_into_a_pipe_stays_one_line() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from dealtrail.cli.common import console, err; console.print({LINE!r}); err.print('x ' * 90)",
        ],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "60"},
        check=True,
    )
    assert proc.stdout == LINE + "\n"
    assert proc.stderr.count("\n") == 1


def test_a_terminal_still_gets_lines_wrapped_at_its_width() -> None:
    out = io.StringIO()
    PipeConsole(file=out, force_terminal=True, width=40, color_system=None).print(LINE)
    lines = out.getvalue().splitlines()
    assert len(lines) > 3 and all(len(line) <= 40 for line in lines)
    assert "".join(out.getvalue().split()) == "".join(LINE.split())
