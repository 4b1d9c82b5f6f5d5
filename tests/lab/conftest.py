"""pytest setup for the lab's unit tests: tools/lab on the import path, the source tree's paths,
and helpers that write small recorded runs (no root, nothing started)."""
import json
import os
import sys

import pytest

SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SOURCE_ROOT, "tools", "lab"))
sys.dont_write_bytecode = True


@pytest.fixture
def source_root():
    return SOURCE_ROOT


@pytest.fixture
def write_file(tmp_path):
    """write_file(relative path, text or JSON-able object) -> the absolute path (dirs created)."""
    def write(relative, content):
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else json.dumps(content))
        return str(path)
    return write
