"""The CLI's help says what really happens: `vault add --include`'s default names every kind a
folder vault indexes out of the box, taken from the source kinds registry."""
from click.testing import CliRunner

from hybrid.core.settings import Settings
from hybrid.faces.cli.main import main
from hybrid.sources import KIND, SOURCES
from hybrid.sources.walk import glob_to_regex


def test_vault_add_help_names_every_kind_a_folder_indexes():
    out = CliRunner().invoke(main, ["vault", "add", "--help"])
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())  # click wraps the help text
    for glob in Settings().include:
        assert glob in text, (glob, text)
    for kind in SOURCES["notes"].kinds:
        assert KIND[kind].help.split(",")[0].split(" (")[0] in text, (kind, text)
    assert "default **/*.md)" not in text


def test_the_include_default_takes_every_kind_a_folder_holds():
    """A glob for each suffix, but none for a suffix that another one's glob already takes
    (``**/*.md`` takes ``x.excalidraw.md``)."""
    suffixes = [s for k in SOURCES["notes"].kinds for s in KIND[k].suffixes]
    globs = [glob_to_regex(g) for g in Settings().include]
    for suffix in suffixes:
        assert any(g.match(f"a/b{suffix}") for g in globs), suffix
    assert set(Settings().include) == {f"**/*{s}" for s in suffixes if s != ".excalidraw.md"}
