from __future__ import annotations

import types

import playa.mcp


def test_the_package_exports_exactly_its_public_names() -> None:
    public = {
        name
        for name, value in vars(playa.mcp).items()
        if not name.startswith("_") and name != "annotations" and not isinstance(value, types.ModuleType)
    }
    assert set(playa.mcp.__all__) == public
    assert set(playa.mcp.__all__) == {
        "MAX_NAME_LENGTH",
        "RESERVED_SERVER_NAMES",
        "LinkHint",
        "decode_base64",
        "exposed_name",
        "exposed_names",
        "is_server_name",
        "map_result",
        "normalize_schema",
        "server_name_problem",
    }
