"""`tidings serve` listens before it creates anything: a port already taken is one line, and
no database, first-start token or inbox channel is left behind. A real subprocess."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.api.server import serve
from tests.cli.process import one_line_error, tidings_cli


def test_a_busy_port_creates_nothing(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = tidings_cli("serve", "--port", str(port), cwd=tmp_path)
    line = one_line_error(done)
    assert line.startswith(f"tidings: cannot listen on 127.0.0.1:{port}: ")
    assert "in use" in line
    assert "tdg_" not in done.stdout + done.stderr
    assert list(tmp_path.iterdir()) == []  # no database, so no token and no inbox either
    served = serve(tmp_path)  # the port free, the first start happens now
    try:
        assert served.token.startswith("tdg_")
    finally:
        assert served.stop() == 0
