"""The CLI's help says what really happens: `vault add --include`'s default names every kind a
folder vault indexes out of the box, taken from the source kinds registry."""
from click.testing import CliRunner

from hybrid.core.settings import Settings
from hybrid.faces.cli.main import main
from hybrid.sources import KIND, SOURCES


def test_vault_add_help_names_every_kind_a_folder_indexes():
    out = CliRunner().invoke(main, ["vault", "add", "--help"])
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())  # click wraps the help text
    for kind in SOURCES["notes"].kinds:
        for suffix in KIND[kind].suffixes:
            assert f"**/*{suffix}" in text, (suffix, text)
    assert "default **/*.md)" not in text


def test_the_include_default_takes_every_kind_a_folder_holds():
    globs = {f"**/*{s}" for k in SOURCES["notes"].kinds for s in KIND[k].suffixes}
    assert set(Settings().include) == globs
