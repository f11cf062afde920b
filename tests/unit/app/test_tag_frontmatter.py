"""Adding tags to a note's front block keeps every other byte of the file: CRLF, a byte-order
mark, comments and odd YAML, tags as a list, a flow list or a string, inline #tags; a front block
that cannot be parsed is refused, never rewritten."""
import pytest

from hybrid.app.tags.frontmatter import TagWriteError, add_tags, check_tag
from hybrid.sources.markdown import parse_note


def tags_of(text: str) -> list[str]:
    return parse_note("n.md", text).tags


def kept_apart_from(before: str, after: str, inserted: list[str]) -> bool:
    """``after`` is ``before`` with exactly the lines ``inserted`` added (nothing else changed)."""
    a = after.split("\n")
    for line in inserted:
        a.remove(line)
    return a == before.split("\n")


def test_no_front_block_gets_one_and_the_body_is_untouched():
    text = "# Title\n\nSome text with #inline tag.\n"
    out = add_tags(text, ["new"])
    assert out == "---\ntags:\n  - new\n---\n" + text
    assert tags_of(out) == ["new", "inline"]


def test_crlf_stays_crlf():
    text = "---\r\ntitle: x\r\ntags:\r\n  - a\r\n---\r\nbody\r\nline two\r\n"
    out = add_tags(text, ["b"])
    assert out == "---\r\ntitle: x\r\ntags:\r\n  - a\r\n  - b\r\n---\r\nbody\r\nline two\r\n"
    plain = "# T\r\nbody\r\n"
    assert add_tags(plain, ["b"]) == "---\r\ntags:\r\n  - b\r\n---\r\n" + plain


def test_comments_and_odd_yaml_are_kept_byte_for_byte():
    text = ("---\n# a comment line\ntitle:   'Odd: title'   # trailing comment\nnested:\n  deep: [1, 2]\n"
            "tags:\n    - a   # first\n    - b\nmulti: |\n  line one\n  line two\ndate: 2024-02-30\n---\n"
            "body #inline\n")
    out = add_tags(text, ["c"])
    assert kept_apart_from(text, out, ["    - c"])
    assert out.index("    - c") > out.index("    - b")
    assert tags_of(out) == ["a", "b", "c", "inline"]


def test_flow_list_and_string_forms():
    assert add_tags("---\ntags: [a, b] # mine\n---\nx\n", ["c"]) == "---\ntags: [a, b, c] # mine\n---\nx\n"
    assert add_tags("---\ntags: []\n---\n", ["c"]) == "---\ntags: [c]\n---\n"
    assert add_tags("---\ntags: a, b\n---\n", ["c"]) == "---\ntags: a, b, c\n---\n"
    assert add_tags("---\ntags: a b\n---\n", ["c"]) == "---\ntags: a b c\n---\n"
    assert add_tags('---\ntags: "a b"\n---\n', ["c"]) == '---\ntags: "a b c"\n---\n'
    assert add_tags("---\nTag: a\n---\n", ["c"]) == "---\nTag: a c\n---\n"


def test_a_block_without_tags_gets_an_entry_before_its_closing_fence():
    text = "---\ntitle: x\n# comment\n---\nbody\n"
    out = add_tags(text, ["c", "work/x"])
    assert out == "---\ntitle: x\n# comment\ntags:\n  - c\n  - work/x\n---\nbody\n"


def test_an_empty_entry_and_a_byte_order_mark():
    assert add_tags("---\ntags:\nx: 1\n---\n", ["c"]) == "---\ntags:\n  - c\nx: 1\n---\n"
    out = add_tags("\ufeff---\ntags: [a]\n---\nbody", ["c"])
    assert out == "\ufeff---\ntags: [a, c]\n---\nbody"


def test_tags_already_carried_are_not_added_again_and_yaml_words_are_quoted():
    text = "---\ntags: [a]\n---\nbody #b\n"
    assert add_tags(text, ["a", "#B"]) == text  # inline tags count; '#' and case normalized
    out = add_tags("---\ntags:\n  - a\n---\n", ["null", "true"])
    assert tags_of(out) == ["a", "null", "true"]


@pytest.mark.parametrize("text", [
    "---\ntags: [a\n---\nbody\n",            # malformed YAML
    "---\ntags: a\nbody without a closing fence\n",  # never closed
    "---\n- just\n- a list\n---\n",          # not a mapping
])
def test_a_front_block_that_cannot_be_parsed_is_refused(text):
    with pytest.raises(TagWriteError, match="cannot be parsed.*nothing was written"):
        add_tags(text, ["c"])


def test_a_form_it_does_not_handle_is_refused_not_guessed():
    with pytest.raises(TagWriteError, match="by hand"):
        add_tags("---\ntags: &x [a]\n---\n", ["c"])
    with pytest.raises(TagWriteError, match="by hand"):
        add_tags("---\ntags: >\n  a b\n---\n", ["c"])


@pytest.mark.parametrize("bad", ["", "two words", "1984", "a,b", "#", "x" * 101, "a:b"])
def test_what_is_not_a_tag_is_refused(bad):
    with pytest.raises(TagWriteError, match="is not a tag"):
        check_tag(bad)
