"""The benchmark runner's command line: what it refuses, it refuses before running anything."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from bench.__main__ import main


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is not None, reason="matplotlib is installed here")
def test_a_chart_without_matplotlib_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chart = tmp_path / "chart.png"
    with pytest.raises(SystemExit) as exit_info:
        main(["--only", "calls", "--chart", str(chart)])
    assert exit_info.value.code == 2
    out, err = capsys.readouterr()
    assert "--chart needs matplotlib" in err
    assert "Playa benchmarks" not in out  # nothing ran
    assert not chart.exists()
