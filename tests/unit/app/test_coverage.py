"""`hybrid status --files`: every file of a vault and what became of it — indexed (chunks),
pending (new, changed, deleted, to be re-read), skipped (why: too large with the sizes, binary,
a PDF without text), failed (the error line), excluded (which glob, set where; no include glob;
hidden; a symlink out of the vault). Real files, real indexes, both stores; a vault whose folder
is not here is told from the index."""
import json
import os

import pytest
from click.testing import CliRunner
from helpers import ALL_STORES, set_chunking_version, write, write_pdf

from hybrid.app.coverage import STATES, skip_code
from hybrid.faces.cli.main import main
from hybrid.indexing import reading

STORES = ALL_STORES

BINARY = b"\x00\x01binary, not a note" * 10


@pytest.fixture
def vault(tmp_path):
    root = tmp_path / "vault"
    write(root, "notes/garden.md", "# Garden\n\nTomatoes need six hours of sun.\n")
    write(root, "notes/empty.md", "")
    write(root, "notes/cursed.md", "# Cursed\n\nThis one breaks the reader.\n")
    (root / "notes/blob.md").write_bytes(BINARY)
    write(root, "big.txt", "word " * 400)  # 2,000 bytes, over max_file_bytes (below)
    write(root, "archive/old.md", "# Old\n\nexcluded by the vault\n")
    write(root, "templates/daily.md", "# {{date}}\n\nexcluded by the settings\n")
    write(root, "photo.psd", "not a note")
    write(root, ".obsidian/app.json", "{}")
    write(root.parent, "elsewhere.md", "# Elsewhere\n")
    os.symlink(root.parent / "elsewhere.md", root / "notes/outside.md")
    return root


@pytest.fixture
def h(open_h, vault, tmp_path, monkeypatch):
    h = open_h(tmp_path / "home", embedder="hash:64", max_file_bytes=1000, exclude=["templates/**"])
    h.add_vault(vault, "v", exclude=["archive/**"])
    real = reading._record

    def cursed(entry, *args, **kwargs):
        if entry.path == "notes/cursed.md":
            raise RuntimeError("the reader broke on purpose\nsecond line not shown")
        return real(entry, *args, **kwargs)
    monkeypatch.setattr(reading, "_record", cursed)
    report = h.index()[0]
    assert (report.added, report.skipped) == (2, 3)
    assert len(report.warnings) == 3  # one warning each: big.txt, notes/blob.md, notes/cursed.md
    yield h
    h.close()


def rows(h) -> dict[str, tuple]:
    return {r.path: (r.state, r.why, r.detail) for r in h.files("v")}


def test_every_file_is_listed_with_its_state_and_reason(h, vault, store_kind):
    got = rows(h)
    assert got == {
        ".obsidian/": ("excluded", "hidden", "hidden (a name starting with '.'): never indexed"),
        "big.txt": ("skipped", "too_large", "2,000 bytes is over max_file_bytes (1,000)"),
        "photo.psd": ("excluded", "not_included", "matches no include glob (set in settings)"),
        "archive/old.md": ("excluded", "excluded", "exclude glob archive/** (set in vault)"),
        "notes/blob.md": ("skipped", "binary", "binary content in a markdown file"),
        "notes/cursed.md": ("failed", "error", "cannot index (RuntimeError: the reader broke on purpose)"),
        "notes/empty.md": ("indexed", "no_text", "note, 0 chunks: no text to index"),
        "notes/garden.md": ("indexed", "", "note, 1 chunk"),
        "notes/outside.md": ("excluded", "outside", "a symlink leading outside the vault"),
        "templates/daily.md": ("excluded", "excluded", "exclude glob templates/** (set in settings)"),
    }
    by_path = {r.path: r for r in h.files("v")}
    assert (by_path["big.txt"].size, by_path["big.txt"].kind) == (2000, "text")
    assert (by_path["archive/old.md"].rule, by_path["archive/old.md"].set_in) == ("archive/**", "vault")
    assert by_path["notes/garden.md"].chunks == 1 and not by_path["notes/garden.md"].from_index
    # walk order: a folder's files, then its folders, each sorted by name
    assert list(by_path)[:3] == [".obsidian/", "big.txt", "photo.psd"]


def test_pending_files_new_changed_deleted_and_reread(h, vault):
    write(vault, "notes/new.md", "# New\n\nA heron fishes.\n")
    write(vault, "notes/garden.md", "# Garden\n\nBasil wants warmth.\n")
    (vault / "notes/empty.md").unlink()
    got = {p: (s, w) for p, (s, w, _) in rows(h).items() if s == "pending"}
    assert got == {"notes/new.md": ("pending", "new"), "notes/garden.md": ("pending", "changed"),
                   "notes/empty.md": ("pending", "deleted")}
    # a file touched to the same bytes is still indexed (the index reflects it)
    h.index()
    os.utime(vault / "notes/new.md", (1_700_000_000, 1_700_000_000))
    assert rows(h)["notes/new.md"][0] == "indexed"
    set_chunking_version(h.config.vault("v"), 8)
    assert rows(h)["notes/garden.md"][:2] == ("pending", "reread")


def test_a_failure_is_tried_again_and_leaves_the_list_once_it_indexes(h, vault, monkeypatch):
    monkeypatch.undo()  # the reader works again
    again = h.index()[0]
    assert again.added == 1 and again.warnings == []  # retried on the next run, now indexed
    assert rows(h)["notes/cursed.md"] == ("indexed", "", "note, 1 chunk")


def test_a_failed_file_changed_since_is_pending(h, vault):
    write(vault, "notes/cursed.md", "# Cursed\n\nEdited since it failed.\n")
    assert rows(h)["notes/cursed.md"][:2] == ("pending", "new")


def test_a_vault_whose_folder_is_not_here_is_told_from_the_index(h, vault, tmp_path, store_kind):
    vault.rename(tmp_path / "moved")
    got = list(h.files("v"))
    assert all(r.from_index for r in got)
    assert {r.path: (r.state, r.why) for r in got} == {
        "notes/empty.md": ("indexed", "no_text"), "notes/garden.md": ("indexed", ""),
        "big.txt": ("skipped", "too_large"), "notes/blob.md": ("skipped", "binary"),
        "notes/cursed.md": ("failed", "error")}


def test_cli_status_files_text_and_json_lines(h, tmp_path, monkeypatch, store_kind):
    home = tmp_path / "home"
    monkeypatch.setenv("HYBRID_HOME", str(home))
    (home / "config.toml").write_text('[settings]\nembedder = "hash:64"\nmax_file_bytes = 1000\n'
                                      'exclude = ["templates/**"]\n\n' + (home / "config.toml").read_text())
    out = CliRunner().invoke(main, ["status", "--files"])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[0].startswith("v: ") and lines[0].endswith("vault")
    assert "  skipped  big.txt  2,000 bytes is over max_file_bytes (1,000)" in lines
    assert "  failed   notes/cursed.md  cannot index (RuntimeError: the reader broke on purpose)" in lines
    assert "  excluded templates/daily.md  exclude glob templates/** (set in settings)" in lines
    assert lines[-1] == "  10 files: 2 indexed, 0 pending, 2 skipped, 1 failed, 5 excluded"

    out = CliRunner().invoke(main, ["status", "--files", "--json", "--vault", "v"])
    assert out.exit_code == 0, out.output
    objs = [json.loads(line) for line in out.output.splitlines()]  # one object a line
    assert len(objs) == 10 and {o["state"] for o in objs} <= set(STATES)
    assert set(objs[0]) == {"vault", "path", "state", "why", "detail", "kind", "size", "chunks", "rule",
                            "set_in", "from_index"}
    big = next(o for o in objs if o["path"] == "big.txt")
    assert big == {"vault": "v", "path": "big.txt", "state": "skipped", "why": "too_large",
                   "detail": "2,000 bytes is over max_file_bytes (1,000)", "kind": "text", "size": 2000,
                   "chunks": None, "rule": None, "set_in": None, "from_index": False}
    out = CliRunner().invoke(main, ["status", "--files", "--vault", "nope"])
    assert out.exit_code != 0 and "unknown vault 'nope'" in out.output


def test_a_vault_never_indexed_lists_its_candidates_as_pending(open_h, vault, tmp_path):
    h = open_h(tmp_path / "home2", embedder="hash:64")
    h.add_vault(vault, "v")
    got = rows(h)
    assert got["notes/garden.md"][:2] == ("pending", "new") and got["photo.psd"][0] == "excluded"
    h.close()


@pytest.mark.slow  # starts the converter process
def test_a_pdf_without_text_is_skipped_with_why(h, vault):
    write_pdf(vault / "papers/scan.pdf", ["x"], images_only=True)
    h.index()
    state, why, detail = rows(h)["papers/scan.pdf"]
    assert (state, why) == ("skipped", "no_text_layer") and detail.startswith("no text layer in 1 page(s)")


def test_skip_codes_follow_the_indexers_reasons():
    assert skip_code("a.pdf: encrypted PDF (needs a password); skipped") == "encrypted"
    assert skip_code("a.pdf: damaged or not a PDF (x); skipped") == "damaged"
    assert skip_code("a.pdf: converting it took longer than 30 s (convert_timeout); skipped") == "timeout"
    assert skip_code("a.pdf: converting it needed more than 512 MB of memory (x); skipped") == "memory"
    assert skip_code("a.html: no text extracted; skipped") == "no_text"
    assert skip_code("a.html: the converter crashed on it (SIGSEGV); skipped") == "not_converted"
