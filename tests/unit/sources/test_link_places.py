"""Where a note links (hybrid.sources.links): each link with the heading path above it and the
words around it, which a picture a note shows takes (hybrid.indexing.context)."""
from hybrid.sources.links import link_places
from hybrid.sources.markdown import parse_note


def test_link_places_give_the_heading_path_and_the_words_around_each_link():
    n = parse_note("home.md", "---\ntags: [x]\n---\n# Home\n\nIntro [[Other|the other note]].\n\n## Shed\n\n"
                   "The receipt for the new hinges:\n![[receipt.png|300]] and ![the whiteboard](wb.png) `[[no]]`\n\n"
                   "```\n![[code.png]]\n```\n### Deeper\n- see [[receipt.png|Shed receipt]]\n")
    got = [(p.target, p.headings, p.words) for p in link_places(n)]
    assert got == [
        ("Other", ("Home",), "Intro the other note ."),
        ("receipt.png", ("Home", "Shed"), "The receipt for the new hinges: and the whiteboard"),  # a size is no words
        ("wb.png", ("Home", "Shed"), "The receipt for the new hinges: and the whiteboard"),
        ("receipt.png", ("Home", "Shed", "Deeper"), "- see Shed receipt"),
    ]  # a link in code is no link


def test_an_embed_on_its_own_takes_the_paragraphs_around_it_in_its_section_as_its_caption():
    n = parse_note("a.md", "# A\n\nOther words.\n\n## Shed\n\nThe receipt for the hinges:\n\n![[receipt.png]]\n\n"
                   "Kept for the warranty.\n\n## Next\n\nUnrelated.\n")
    assert [(p.headings, p.words) for p in link_places(n)] == [
        (("A", "Shed"), "The receipt for the hinges: Kept for the warranty.")]
