"""The one YAML front-matter parser that `SKILL.md` files and `agents/*.md` files share."""

from __future__ import annotations

import pytest

from fathom._frontmatter import (
    MAX_FRONT_MATTER_CHARS,
    MAX_FRONT_MATTER_NODES,
    FrontMatterError,
    parse_front_matter,
)


def test_fields_and_body_are_split() -> None:
    meta, body = parse_front_matter("---\nname: a\ndescription: b\n---\n# Title\n\ntext\n")
    assert meta == {"name": "a", "description": "b"}
    assert body == "# Title\n\ntext\n"


def test_crlf_line_endings_and_a_byte_order_mark() -> None:
    meta, body = parse_front_matter("\ufeff---\r\nname: a\r\ntools: [x, y]\r\n---\r\nbody\r\n")
    assert meta == {"name": "a", "tools": ["x", "y"]}
    assert body == "body\r\n"


def test_trailing_blanks_on_the_marks_and_a_closing_mark_at_the_end() -> None:
    assert parse_front_matter("--- \t\nname: a\n---  ") == ({"name": "a"}, "")


def test_empty_front_matter_is_an_empty_mapping() -> None:
    assert parse_front_matter("---\n---\nbody") == ({}, "body")
    assert parse_front_matter("---\n# only a comment\n---\n") == ({}, "")


def test_a_dash_line_in_the_body_stays_in_the_body() -> None:
    text = "---\nname: a\n---\nintro\n---\nname: not front matter\n---\n"
    meta, body = parse_front_matter(text)
    assert meta == {"name": "a"}
    assert body == "intro\n---\nname: not front matter\n---\n"


def test_keys_become_strings_at_every_depth() -> None:
    text = "---\n1: one\nnull: n\nmetadata:\n  2.5: two\n  list: [{3: c}]\n---\n"
    meta, _ = parse_front_matter(text)
    assert meta == {"1": "one", "None": "n", "metadata": {"2.5": "two", "list": [{"3": "c"}]}}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("# no front matter\n", "does not start with YAML front matter"),
        ("", "does not start with YAML front matter"),
        ("----\nname: a\n----\n", "does not start with YAML front matter"),
        (" ---\nname: a\n---\n", "does not start with YAML front matter"),
        ("---\nname: a\n", "has no closing '---' line"),
        ("---\nname: a\n--- x\n", "has no closing '---' line"),
        ("---\n- a\n- b\n---\n", "must be a mapping of fields (name: ...), not a list"),
        ("---\njust text\n---\n", "must be a mapping of fields (name: ...), not a str"),
        ("---\nwhen: 2024-13-45\n---\n", "not valid YAML"),
        ("---\n!!python/object:os.system x: 1\n---\n", "not valid YAML"),
    ],
)
def test_malformed_front_matter_says_what_is_wrong(text: str, reason: str) -> None:
    with pytest.raises(FrontMatterError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        parse_front_matter(text)


def test_bad_yaml_names_the_line_of_the_file() -> None:
    text = "---\nname: a\ndescription: b\ntools: [x, y\n---\nbody\n"
    with pytest.raises(FrontMatterError) as info:
        parse_front_matter(text)
    assert info.value.line == 5  # the unclosed list runs into the closing mark
    assert info.value.reason.startswith("its front matter is not valid YAML: ")
    assert str(info.value).startswith("line 5: ")
    with pytest.raises(FrontMatterError) as info:
        parse_front_matter("---\nname: a\n  bad: indent\n---\n")
    assert info.value.line == 3


def test_front_matter_over_the_size_limit_is_refused() -> None:
    field = "x" * MAX_FRONT_MATTER_CHARS
    with pytest.raises(FrontMatterError, match="characters long; the limit is"):
        parse_front_matter(f"---\ndescription: {field}\n---\nbody\n")
    fits = "x" * (MAX_FRONT_MATTER_CHARS - len("description: \n"))
    assert parse_front_matter(f"---\ndescription: {fits}\n---\n")[0]["description"] == fits


def test_aliases_that_expand_to_billions_of_values_are_refused() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    text = "---\n" + "\n".join(lines) + "\n---\n"
    assert len(text) < 1000  # small on disk: 10**9 values once the aliases are expanded
    with pytest.raises(FrontMatterError, match=f"more than {MAX_FRONT_MATTER_NODES:,} values"):
        parse_front_matter(text)


def test_deep_nesting_is_refused() -> None:
    with pytest.raises(FrontMatterError, match="levels deep"):
        parse_front_matter("---\nx: " + "[" * 5000 + "]" * 5000 + "\n---\n")
