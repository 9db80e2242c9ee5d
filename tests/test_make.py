"""`make run` installs only what running needs (the package); `make test` adds the dev extra.
What running needs is checked by running tidings with every dev-only package made
unimportable."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Import names of the dev extra's packages (apprise is an optional extra of its own).
DEV_ONLY = [
    "aiosmtpd", "trustme", "pytest", "pytest_asyncio", "xdist", "hypothesis", "psycopg", "mypy",
    "ruff", "httpx", "schemathesis", "playwright", "importlinter", "apprise",
]  # fmt: skip


def dry_run(target: str, venv: Path) -> list[str]:
    done = subprocess.run(
        ["make", "-n", target, f"VENV={venv}"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return [line for line in done.stdout.splitlines() if "pip install" in line and "-e" in line]


def test_make_run_installs_the_package_and_make_test_the_dev_extra(tmp_path: Path) -> None:
    (run,) = dry_run("run", tmp_path / "venv")
    assert run.endswith("pip install --quiet -e .")
    (test,) = dry_run("test", tmp_path / "venv")
    assert test.endswith("pip install --quiet -e '.[dev]'")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    dev = {name.split(">")[0].split("[")[0] for name in extras["optional-dependencies"]["dev"]}
    assert {d.replace("-", "") for d in dev} >= {"pytest", "httpx", "playwright"}


def test_tidings_runs_without_the_dev_extra(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import importlib, pkgutil, sys
        BLOCKED = {DEV_ONLY!r}

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ImportError(f"{{name}} is a dev-only package")
                return None

        sys.meta_path.insert(0, Block())
        import tidings
        for info in pkgutil.walk_packages(tidings.__path__, "tidings."):
            if ".migrations" not in info.name and info.name != "tidings.__main__":
                importlib.import_module(info.name)
        from tidings.cli import main
        db = "sqlite:///{tmp_path / "run.db"}"
        assert main(["db", "upgrade", "--db", db]) == 0
        assert main(["channel", "add", "--name", "ops", "--kind", "inbox", "--db", db]) == 0
        assert main(["publish", "--kind", "a.b", "--subject", "s", "--db", db]) == 0
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 deliveries" in done.stdout
