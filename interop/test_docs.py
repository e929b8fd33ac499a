"""The README's Python snippets, run exactly as written with only the
server's address substituted, and clients/python/quiver_example.py, run
as a user runs it: each in its own interpreter against `quiver serve`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest
from deltalake import DeltaTable

from helpers import REPO, Quiver

README_ADDR = "127.0.0.1:8815"  # the address the README's snippets use


@pytest.fixture(scope="module")
def server(serve: Callable[..., Quiver], tmp_path_factory: pytest.TempPathFactory) -> Quiver:
    root = tmp_path_factory.mktemp("docs")
    return serve([
        {"name": "devnull", "sink": "discard"},
        {"name": "events", "sink": "delta", "delta": {"table_uri": f"file://{root / 'events'}"}},
    ])


def run(args: list[str], cwd: Path) -> str:
    done = subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{args[:2]} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def snippets() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", (REPO / "README.md").read_text(), re.S | re.M)


def test_readme_has_the_snippets() -> None:
    found = snippets()
    assert len(found) == 3 and all(README_ADDR in s for s in found), found


@pytest.mark.parametrize("index", range(3))
def test_readme_snippet(server: Quiver, tmp_path: Path, index: int) -> None:
    code = snippets()[index]
    out = run(["-c", code.replace(README_ADDR, server.flight_addr)], tmp_path)
    if "adbc_ingest" in code:
        table = DeltaTable(str(server.table_path("events")))
        assert table.to_pyarrow_table().num_rows >= 3
    else:
        assert "committed" in out.lower(), out


def test_example(server: Quiver, tmp_path: Path) -> None:
    out = run([str(REPO / "clients/python/quiver_example.py"), "--addr", server.flight_addr], tmp_path)
    assert "auto-commit: Ack(rows=100000" in out and "batch 3: 25000 rows" in out, out
    assert "replayed put: Ack(rows=100000" in out and "replayed=True" in out.split("replayed commit:")[1], out
