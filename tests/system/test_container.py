"""The container recipe (service/team), checked as far as a machine without Docker allows: the
Dockerfile lints clean with hadolint, compose.yaml is valid against the compose specification's
JSON schema (the copy check-jsonschema vendors, Apache-2.0) and says what hybrid's entrypoint
needs, the entrypoint lints clean with shellcheck, and its commands run against a real
PostgreSQL (the last test: everything the image would run, less Docker)."""
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from helpers import write

import hybrid

RECIPE = Path(__file__).resolve().parents[2] / "service" / "team"
ENTRYPOINT = RECIPE / "entrypoint.sh"


def tool(name: str) -> str:
    """A lint tool of the dev extra: beside this Python, else on PATH. Missing: a failure in CI
    (a skip there would prove nothing), a skip elsewhere."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail(f"{name} missing: the container recipe's lints must run in CI (pip install -e '.[dev]')",
                    pytrace=False)
    pytest.skip(f"{name} not installed (pip install -e '.[dev]')")


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def test_the_dockerfile_lints_clean_with_hadolint():
    p = run(tool("hadolint"), "--no-color", str(RECIPE / "Dockerfile"))
    assert p.returncode == 0, p.stdout + p.stderr


def test_hadolint_does_report_what_it_is_asked_to_check(tmp_path):
    """The lint is live: an unpinned apt-get install in a copy of the Dockerfile is reported."""
    bad = tmp_path / "Dockerfile"
    bad.write_text((RECIPE / "Dockerfile").read_text() + "RUN apt-get install curl\n")
    p = run(tool("hadolint"), "--no-color", str(bad))
    assert p.returncode == 1 and "DL3008" in p.stdout, p.stdout + p.stderr


def test_the_entrypoint_lints_clean_with_shellcheck():
    p = run(tool("shellcheck"), "--shell=sh", str(ENTRYPOINT))
    assert p.returncode == 0, p.stdout + p.stderr


def test_compose_file_is_valid_against_the_compose_specification():
    p = run(tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(RECIPE / "compose.yaml"))
    assert p.returncode == 0, p.stdout + p.stderr


def test_compose_schema_check_rejects_what_compose_would(tmp_path):
    """The schema is really applied: a service with an unknown key fails."""
    spec = yaml.safe_load((RECIPE / "compose.yaml").read_text())
    spec["services"]["server"]["restart_policy"] = "always"  # a deploy: key, not a service key
    bad = tmp_path / "compose.yaml"
    bad.write_text(yaml.safe_dump(spec))
    p = run(tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(bad))
    assert p.returncode == 1 and "restart_policy" in p.stdout, p.stdout + p.stderr


def entrypoint_roles() -> set[str]:
    """The roles the entrypoint's ``case`` names (besides ``*``, any hybrid command)."""
    return set(re.findall(r"^\s+(\w+)\) ", ENTRYPOINT.read_text(), re.M))


def test_compose_file_runs_what_the_entrypoint_knows():
    """hybrid's own checks: each hybrid service is built from this Dockerfile, runs a role of
    the entrypoint, reaches the database service, mounts the notes where the entrypoint looks
    (VAULT_DIR, /kb), and the query server publishes the port it listens on with a token set."""
    spec = yaml.safe_load((RECIPE / "compose.yaml").read_text())
    services = spec["services"]
    assert {"db", "indexer", "server"} <= set(services)
    assert "pgvector" in services["db"]["image"] and "healthcheck" in services["db"]
    text = ENTRYPOINT.read_text()
    assert "VAULT_DIR=${VAULT_DIR:-/kb}" in text and "--port 8765" in text
    assert entrypoint_roles() == {"index", "serve"}
    for name in ("indexer", "server"):
        svc = services[name]
        build = svc["build"]
        assert (RECIPE / build["context"] / build["dockerfile"]).resolve() == RECIPE / "Dockerfile"
        assert svc["command"][0] in entrypoint_roles()
        assert svc["environment"]["HYBRID_DATABASE_URL"].endswith("@db/kb")
        assert svc["depends_on"]["db"]["condition"] == "service_healthy"
        assert any(str(v).endswith(":/kb:ro") for v in svc["volumes"])
    assert services["indexer"]["command"] == ["index"] and services["server"]["command"] == ["serve"]
    assert "HYBRID_TOKEN" in services["server"]["environment"]
    assert any(str(p).endswith(":8765") for p in services["server"]["ports"])


@pytest.fixture
def shim(tmp_path) -> Path:
    """A ``hybrid`` on PATH that runs this checkout (as the image's console script would)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "hybrid"
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m hybrid "$@"\n')
    exe.chmod(0o755)
    return bin_dir


def entry_env(tmp_path, shim, url, **extra) -> dict:
    """The container's environment on this machine: a home whose embedder is the hash one (the
    image's is the real model; what is checked here is the commands)."""
    write(tmp_path / "home", "config.toml", '[settings]\nembedder = "hash:64"\n')
    env = dict(os.environ, PATH=f"{shim}{os.pathsep}{os.environ['PATH']}", HYBRID_HOME=str(tmp_path / "home"),
               HYBRID_DATABASE_URL=url, VAULT_DIR=str(tmp_path / "kb"), **extra)
    env.pop("HYBRID_FAULT", None)
    return env


def test_the_entrypoints_commands_run_without_docker(tmp_path, shim, pg_url):
    """What the image runs, on this machine: the `index` role registers the vault (once, across
    restarts), indexes it and leaves `hybrid watch` running; a pass-through command (`query`,
    `status`) runs in the same home; without HYBRID_DATABASE_URL it stops with one line."""
    write(tmp_path / "kb", "runbooks/rollback.md", "# Rolling back\n\nRun `forge rollback` and watch the canary.\n")
    env = entry_env(tmp_path, shim, pg_url)
    indexer = subprocess.Popen(["sh", str(ENTRYPOINT), "index"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        found = ""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and "rollback.md" not in found:
            assert indexer.poll() is None, indexer.communicate()
            found = subprocess.run(["sh", str(ENTRYPOINT), "query", "forge rollback canary", "--vault", "team"],
                                   env=env, capture_output=True, text=True, timeout=120).stdout
            time.sleep(0.5)
        assert "runbooks/rollback.md" in found
        assert indexer.poll() is None  # `hybrid watch` runs on after the first index
    finally:
        indexer.terminate()
        indexer.communicate(timeout=30)
    status = subprocess.run(["sh", str(ENTRYPOINT), "status"], env=env, capture_output=True, text=True, timeout=120)
    assert status.returncode == 0 and "team: " in status.stdout and "postgresql://" in status.stdout
    h = hybrid.open(tmp_path / "home")
    assert list(h.config.vaults) == ["team"]  # registered once, though run three times
    h.close()
    bare = {k: v for k, v in env.items() if k != "HYBRID_DATABASE_URL"}
    p = subprocess.run(["sh", str(ENTRYPOINT), "status"], env=bare, capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "set HYBRID_DATABASE_URL" in p.stderr
