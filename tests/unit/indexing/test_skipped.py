"""Files an index run skips (a damaged PDF, a binary "note", a file over a size limit) are
remembered in the ledger with their size, mtime and reason: `status` shows them as skipped, not
as new; later runs neither read nor warn about them again until they change (then they are
retried); one that then indexes leaves the list. Real files, real indexes, both stores."""
import os

import pytest
from click.testing import CliRunner
from helpers import ALL_STORES, write, write_pdf

from hybrid.faces.cli.main import main
from hybrid.indexing import reading

STORES = ALL_STORES  # tests that use `store_kind` run against both stores

BINARY = b"\x00\x01binary, not a note" * 10


@pytest.fixture
def vault(tmp_path):
    root = tmp_path / "vault"
    write(root, "notes/garden.md", "# Garden\n\nTomatoes need six hours of sun.\n")
    (root / "notes/blob.md").write_bytes(BINARY)
    write(root, "big.txt", "word " * 400)  # over max_file_bytes (below)
    return root


@pytest.fixture
def h(open_h, vault, tmp_path):
    h = open_h(tmp_path / "home", embedder="hash:64", max_file_bytes=1000)
    h.add_vault(vault, "v")
    yield h
    h.close()


def reads(monkeypatch) -> list[str]:
    """The documents read (hashed and parsed) from now on, in order."""
    seen: list[str] = []
    real = reading._record

    def counting(entry, *args, **kwargs):
        seen.append(entry.path)
        return real(entry, *args, **kwargs)
    monkeypatch.setattr(reading, "_record", counting)
    return seen


def test_skipped_files_are_remembered_shown_as_skipped_and_not_warned_again(h, vault, monkeypatch):
    first = h.index()[0]
    assert (first.added, first.skipped) == (1, 2)
    assert sorted(w.split(":")[0] for w in first.warnings) == ["big.txt", "notes/blob.md"]
    changes = h.status()[0].changes
    assert (changes.new, changes.changed, changes.skipped) == (0, 0, 2)  # not "2 new"
    assert {f["path"]: f["reason"] for f in changes.skipped_files} == {
        "big.txt": "big.txt: 2,000 bytes is over max_file_bytes (1,000); skipped",
        "notes/blob.md": "notes/blob.md: binary content in a markdown file; skipped"}
    assert changes.text == "up to date · 2 skipped (`hybrid status --skipped` says why)"

    read = reads(monkeypatch)
    write(vault, "notes/later.md", "# Later\n\nA heron fishes.\n")
    again = h.index()[0]
    assert (again.added, again.skipped, again.warnings) == (1, 2, [])  # counted, not warned
    assert read == ["notes/later.md"]  # and not read

    # a file touched to the same bytes is read (its stat changed) but not warned about again
    os.utime(vault / "notes/blob.md", (1_700_000_000, 1_700_000_000))
    touched = h.index()[0]
    assert (touched.skipped, touched.warnings) == (2, [])
    assert h.status()[0].changes.skipped == 2

    # changed: tried again (and still skipped, with its warning); then fixed: indexed, off the list
    (vault / "notes/blob.md").write_bytes(BINARY + b"more")
    retried = h.index()[0]
    assert retried.warnings == ["notes/blob.md: binary content in a markdown file; skipped"]
    write(vault, "notes/blob.md", "# Blob\n\nNow a real note about pelicans.\n")
    fixed = h.index()[0]
    assert (fixed.added, fixed.skipped, fixed.warnings) == (1, 1, [])
    assert h.search("pelicans", mode="lexical")[0].path == "notes/blob.md"
    assert [f["path"] for f in h.status()[0].changes.skipped_files] == ["big.txt"]
    # a file gone from the vault leaves the list too
    (vault / "big.txt").unlink()
    h.index()
    assert h.status()[0].changes.skipped == 0


def test_raising_the_limit_retries_what_it_turned_away(h, vault, open_h, tmp_path):
    h.index()
    roomy = open_h(tmp_path / "home", embedder="hash:64", max_file_bytes=10_000)
    # judged under a new limit, both are tried again (the binary note is skipped again)
    assert (roomy.status()[0].changes.new, roomy.status()[0].changes.skipped) == (2, 0)
    report = roomy.index()[0]
    assert (report.added, report.skipped) == (1, 1)
    roomy.close()


@pytest.mark.slow  # starts the converter process
def test_a_damaged_pdf_is_skipped_once_until_it_changes(h, vault, monkeypatch):
    (vault / "papers").mkdir()
    (vault / "papers/broken.pdf").write_bytes(b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog >>\nendobj\ntrailer")
    first = h.index()[0]
    assert any(w.startswith("papers/broken.pdf: damaged or not a PDF") for w in first.warnings)
    assert h.status()[0].changes.skipped == 3
    read = reads(monkeypatch)
    assert h.index()[0].warnings == [] and read == []
    write_pdf(vault / "papers/broken.pdf", ["Calibrate the periscope lens every spring."])
    fixed = h.index()[0]
    assert fixed.added == 1 and read == ["papers/broken.pdf"] and fixed.warnings == []
    assert h.search("periscope", mode="lexical")[0].path == "papers/broken.pdf"
    assert h.status()[0].changes.skipped == 2


def test_cli_status_lists_the_skipped_files_on_request(h, tmp_path, monkeypatch, store_kind):
    h.index()
    home = tmp_path / "home"
    monkeypatch.setenv("HYBRID_HOME", str(home))
    (home / "config.toml").write_text('[settings]\nembedder = "hash:64"\nmax_file_bytes = 1000\n\n'
                                      + (home / "config.toml").read_text())
    out = CliRunner().invoke(main, ["status"]).output
    assert "files on disk: up to date · 2 skipped" in out and "binary content" not in out
    out = CliRunner().invoke(main, ["status", "--skipped"]).output
    assert "    skipped notes/blob.md: binary content in a markdown file; skipped" in out
    assert "    skipped big.txt: 2,000 bytes is over max_file_bytes (1,000); skipped" in out


def test_a_reader_that_recurses_too_deep_is_skipped_and_remembered(h, vault, monkeypatch):
    """A RecursionError is the file's shape past what a reader's stack holds (a canvas of 3,000
    nested groups raised one): a bound, remembered like the others, not an error tried on every
    run (issue #47)."""
    from hybrid.sources import convert
    real = convert.parse_note

    def ouroboros(path, text):  # a reader that recurses once a level of something in the file
        return ouroboros(path, text) if "ouroboros" in text else real(path, text)

    monkeypatch.setattr(convert, "parse_note", ouroboros)
    write(vault, "notes/deep.md", "# Deep\n\nouroboros\n")
    first = h.index()[0]
    deep = [w for w in first.warnings if w.startswith("notes/deep.md")]
    assert deep == ["notes/deep.md: nested too deep to read (RecursionError: maximum recursion depth "
                    "exceeded); skipped"]
    read = reads(monkeypatch)
    again = h.index()[0]
    assert read == [] and not [w for w in again.warnings if "deep.md" in w]  # not tried again
    assert {r.path: (r.state, r.why) for r in h.files("v")}["notes/deep.md"] == ("skipped", "too_deep")
    write(vault, "notes/deep.md", "# Deep\n\nno longer circular\n")  # changed: tried again, indexed
    third = h.index()[0]
    assert read == ["notes/deep.md"] and third.updated + third.added == 1
    assert h.search("circular", mode="lexical")[0].path == "notes/deep.md"
