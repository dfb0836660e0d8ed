"""Markdown chunking by headings, with a size cap and exact line ranges."""

from __future__ import annotations

from memvault.index.chunking import chunk_markdown

DOC = """Intro line before any heading.

# Project API
Overview of the API.

## Deploy
- deploys go through make release
- never push tags by hand

```sh
# not a heading: inside a code fence
make release
```

## Database
postgres 16
### Migrations
alembic upgrade head
# Second title
last line"""


def test_sections_heading_paths_and_line_ranges():
    chunks = chunk_markdown(DOC)
    lines = DOC.splitlines()
    assert [c.heading for c in chunks] == [
        "",
        "Project API",
        "Project API > Deploy",
        "Project API > Database",
        "Project API > Database > Migrations",
        "Second title",
    ]
    for chunk in chunks:
        assert chunk.text == "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
    deploy = chunks[2]
    assert "# not a heading" in deploy.text and deploy.start_line == 6
    assert chunks[-1].end_line == len(lines)


def test_long_sections_are_split_with_exact_ranges():
    body = "\n".join(f"line {i} " + "word " * 20 for i in range(200))
    doc = "# Big\n" + body
    chunks = chunk_markdown(doc, max_chars=1000)
    assert len(chunks) > 5
    assert all(len(c.text) <= 1000 + 200 for c in chunks)
    assert all(c.heading == "Big" for c in chunks)
    lines = doc.splitlines()
    covered = []
    for c in chunks:
        assert c.text == "\n".join(lines[c.start_line - 1 : c.end_line])
        covered += list(range(c.start_line, c.end_line + 1))
    assert covered == list(range(1, len(lines) + 1)), "every line exactly once"


def test_empty_and_blank_documents():
    assert chunk_markdown("") == []
    assert chunk_markdown("\n\n  \n") == []
    assert [c.text for c in chunk_markdown("just text")] == ["just text"]


def test_a_part_cut_from_a_file_without_headings_keeps_its_first_line():
    """The date or title on a file's first line is shown with every part of it
    (not indexed with it)."""
    turns = [f"[8 May 2023] Caroline: line {i} " + "words " * 30 for i in range(40)]
    text = "Session 3 (1:56 pm on 8 May, 2023)\n\n" + "\n".join(turns) + "\n"
    chunks = chunk_markdown(text)
    assert len(chunks) > 2
    assert chunks[0].title == "" and chunks[0].text.startswith("Session 3")
    assert all(c.title == "Session 3 (1:56 pm on 8 May, 2023)" for c in chunks[1:])
    assert all(c.heading == "" for c in chunks)
    assert not chunks[1].for_embedding().startswith("Session 3")
    headed = chunk_markdown("intro line\n# Title\n" + "x " * 1000 + "\n")
    assert [c.heading for c in headed] == ["", "Title", "Title"]
    assert [c.title for c in headed] == ["", "", ""], "a heading says where it is"
