"""How paths and tags are compared (issue #51): one ``fold()`` (NFC, then Unicode case folding),
wherever two spellings of a path or tag are compared in Python: the agent view (paths, globs,
tags), the proposals folder's bounds, repeated bookmark paths. A tag's stored form (what the
indexes hold, hits show and the tag desk writes: NFC, lower case) and a folder filter's value
(as typed, compared with the stored paths byte for byte) are forms, not comparisons; both are
pinned here.

The first tests pin what ordinary input (ASCII, accented, mixed case) did before the fold was
made one and must still do; the last ones are the edge cases, each decided on purpose."""

from __future__ import annotations

import datetime as dt
import unicodedata

import pytest
from helpers import write

from hybrid.app.proposals import ProposalError, accept, write_proposal
from hybrid.core.config import Vault
from hybrid.core.folding import fold
from hybrid.retrieval.query import normalize_folder
from hybrid.sources.bookmarks import Bookmark, bookmark_paths
from hybrid.sources.markdown import normalize_tag
from hybrid.store.agent.view import AgentView

NFD = "Ide\u0301es"   # "Idées" as a macOS (HFS+) file name spells it: e + combining acute
NFC = "Id\u00e9es"    # "Idées" as typed


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


@pytest.fixture
def v(tmp_path) -> Vault:
    root = tmp_path / "vault"
    write(root, "note.md", "# A note\n")
    return Vault(name="vault", path=root, include=["**/*.md"], exclude=[], embedder="hash:64",
                 index_dir=tmp_path / "index")


def _proposal(v: Vault, folder: str) -> str:
    return write_proposal(v, folder, "Tailscale ACL", "Allow the lab subnet.\n", proposed_by="claude",
                          now=dt.datetime(2026, 11, 30, tzinfo=dt.UTC)).path


# --- ordinary input: as before ----------------------------------------------------------------

@pytest.mark.parametrize("glob,path", [("Journal/**", "journal/Day.md"), ("journal/**", "JOURNAL/day.md"),
                                       ("Idées/**", "IDÉES/Été.md"), ("idées/**", "Idées/x.md")])
def test_the_agent_view_hides_a_path_whatever_its_case(glob, path):
    assert AgentView(exclude=(glob,)).hides(path) == "agent_exclude"
    assert AgentView(exclude=(glob,)).hides("other/" + path) is None


@pytest.mark.parametrize("private,tag", [("private", "Private"), ("Private", "private/sub"),
                                         ("#Geheim/", "GEHEIM"), ("Privé", "PRIVÉ/x")])
def test_the_agent_view_hides_a_private_tag_whatever_its_case(private, tag):
    view = AgentView(private_tags=(fold(private.lstrip("#").strip("/")),))  # as AgentView.of does
    assert view.hides("a.md", [tag]) == "private tag"
    assert view.hides("a.md", [tag.split("/")[0] + "s"]) is None


@pytest.mark.parametrize("folder,to", [("agent_learnings", "Agent_Learnings/x"), ("Idées", "IDÉES"),
                                       ("Idées", "idées/sub")])
def test_accept_refuses_the_proposals_folder_in_another_case(v, folder, to):
    name = _proposal(v, folder)
    with pytest.raises(ProposalError, match="inside the proposals folder"):
        accept(v, folder, name, to)


def test_accept_takes_a_folder_beside_the_proposals_folder(v):
    name = _proposal(v, "Idées")
    assert accept(v, "Idées", name, "Idées-old").path.startswith("Idées-old/")


def test_a_tag_is_stored_without_hash_or_outer_slashes_in_nfc_lower_case():
    assert normalize_tag(" #Projects/Alpha/ ") == "projects/alpha"
    assert normalize_tag("#Café") == normalize_tag(nfd("#Café")) == "café"
    assert normalize_tag("ÉTÉ") == "été"


def test_a_folder_filter_keeps_its_case_and_its_form():
    assert normalize_folder(" /Work/Notes/ ") == "Work/Notes"
    assert normalize_folder("Café/Été/") == "Café/Été"
    assert normalize_folder(NFD + "/") == NFD  # the stores compare it with the paths as walked


def test_repeated_bookmark_paths_are_told_apart_whatever_their_case():
    marks = [Bookmark(url=f"https://e.x/{i}", title=t, folder=("Docs",), tags=(), added=None)
             for i, t in enumerate(["Python", "PYTHON", "Café", "CAFÉ"])]
    assert bookmark_paths(marks) == ["Docs/Python.bookmark", "Docs/PYTHON (2).bookmark",
                                     "Docs/Café.bookmark", "Docs/CAFÉ (2).bookmark"]


def test_fold_of_ordinary_text_is_its_lower_case():
    for text in ("Journal/Daily.md", "IDÉES/Été.md", "projects/Alpha", "#Tag"):
        assert fold(text) == text.lower()


# --- edge cases, decided ----------------------------------------------------------------------

def test_composed_and_decomposed_spellings_are_one():
    """macOS's HFS+ writes file names decomposed; a name typed is composed. Compared, they are
    one name everywhere the fold is used (before: the proposals check told them apart, while
    the agent view, which hides proposals, did not)."""
    assert fold(NFD) == fold(NFC) == NFC.lower()
    assert AgentView(exclude=(NFC + "/**",)).hides(NFD + "/x.md") == "agent_exclude"
    assert AgentView(exclude=(NFD + "/**",)).hides(NFC + "/x.md") == "agent_exclude"
    # the folder filter and the tag's stored form are unchanged: as typed, and NFC
    assert normalize_folder(NFD) != normalize_folder(NFC)
    assert normalize_tag(NFD) == normalize_tag(NFC)


def test_accept_refuses_the_proposals_folder_spelled_decomposed(v):
    """Changed: before, a decomposed ``--to`` naming the (composed) proposals folder passed the
    check, and the reviewed note landed where the agent view hides it as a proposal."""
    name = _proposal(v, NFC)
    with pytest.raises(ProposalError, match="inside the proposals folder"):
        accept(v, NFC, name, NFD + "/sub")


def test_german_sharp_s_folds_to_ss_in_comparisons_and_stays_in_a_tag():
    """Unicode case folding makes ``ß`` and ``SS`` one (as before in the agent view and the
    proposals check). A tag keeps ``ß``: its stored form is lower case, as Obsidian matches
    tags, and the tag desk writes that form into notes."""
    assert fold("Straße") == fold("STRASSE") == fold("strasse") == "strasse"
    assert AgentView(private_tags=(fold("straße"),)).hides("a.md", ["STRASSE"]) == "private tag"
    assert normalize_tag("#Straße") == "straße" != normalize_tag("#STRASSE")


def test_turkish_dotted_and_dotless_i_fold_without_a_locale():
    """The default (locale-free) case folding, as before everywhere: ``İ`` folds to ``i`` with
    a combining dot above, so it is not ``i``; ``ı`` stays itself, so it is not ``i`` either."""
    assert fold("İstanbul") == "i\u0307stanbul" != fold("istanbul")
    assert fold("ılık") == "ılık" != fold("ilik")
    assert fold("İ") == fold("i\u0307") and normalize_tag("İ") == "i\u0307"


def test_greek_final_sigma_and_ligatures_fold_in_comparisons_only():
    assert fold("ΟΔΟΣ") == fold("οδος") == "οδοσ"
    assert fold("ﬁle") == "file"
    assert normalize_tag("ΟΔΟΣ") == "οδος" and normalize_tag("ﬁle") == "ﬁle"


def test_fold_is_idempotent_and_nfc():
    for text in ("Straße", NFD, "ǰ", "İ", "ΟΔΟΣ", "ﬀ", "µ", "Ꭰ", "ŉ"):
        once = fold(text)
        assert fold(once) == once and unicodedata.is_normalized("NFC", once), text
