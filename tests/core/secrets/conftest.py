from __future__ import annotations

import pytest

from playa.core.secrets import _decode, _redact


@pytest.fixture(params=["direct", "filter"])
def search(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How a Redactor searches a text: each form (and run) looked for in it, or the block filter.

    A test that uses it runs with each; it may ask for the defaults instead ("default"), which
    choose between them by the text's length.
    """
    if request.param != "default":
        monkeypatch.setattr(_redact, "_DIRECT", 1 << 62 if request.param == "direct" else 0)
        monkeypatch.setattr(_redact, "_DIRECT_BUDGET", 1 << 62)
    return str(request.param)


@pytest.fixture
def decodings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the redactor's decodings of a run around a block (a one-item list, updated in place)."""
    calls = [0]
    find = _decode._Decoder.find

    def counted(
        self: _decode._Decoder, data: bytes, position: int
    ) -> tuple[int, int, tuple[int, int] | None]:
        calls[0] += 1
        return find(self, data, position)

    monkeypatch.setattr(_decode._Decoder, "find", counted)
    return calls
