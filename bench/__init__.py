"""Benchmarks: Playa against the bare ``mcp`` SDK, measured side by side. Run ``python -m bench``."""

import sys
from importlib.util import find_spec
from pathlib import Path

# ``./dev bench`` runs with Playa installed in the venv; a bare ``python -m bench`` from a checkout
# that was never installed finds it in ``src`` instead.
if find_spec("playa") is None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
