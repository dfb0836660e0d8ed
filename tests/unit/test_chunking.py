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


def assert_every_line_once(doc: str, chunks) -> None:
    """Each chunk's text is exactly its lines, and the chunks cover the file in order."""
    lines = doc.splitlines()
    covered = []
    for c in chunks:
        assert c.text == "\n".join(lines[c.start_line - 1 : c.end_line])
        covered += list(range(c.start_line, c.end_line + 1))
    assert covered == list(range(1, len(lines) + 1)), "every line exactly once"


def test_sections_heading_paths_and_line_ranges():
    chunks = chunk_markdown(DOC, max_chars=30)  # no two sections fit together
    lines = DOC.splitlines()
    assert list(dict.fromkeys(c.heading for c in chunks)) == [
        "",
        "Project API",
        "Project API > Deploy",
        "Project API > Database",
        "Project API > Database > Migrations",
        "Second title",
    ]
    for chunk in chunks:
        assert chunk.text == "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
    fenced = [c for c in chunks if "# not a heading" in c.text]
    assert [c.heading for c in fenced] == ["Project API > Deploy"]
    assert chunks[-1].end_line == len(lines)


def test_a_memory_that_fits_in_the_window_is_one_chunk():
    (chunk,) = chunk_markdown(DOC)
    assert (chunk.heading, chunk.start_line, chunk.end_line) == ("", 1, len(DOC.splitlines()))
    assert chunk.text == DOC


def test_small_sections_merge_up_to_the_window_and_a_big_one_stands_alone():
    parts = [f"# Part {i}\n" + "word " * 50 for i in range(10)]  # about 260 characters each
    doc = "\n".join(parts[:7]) + "\n# Big\n" + "long line of text\n" * 80 + "\n".join(parts[7:])
    chunks = chunk_markdown(doc, max_chars=1000)
    assert [c.heading for c in chunks] == [
        "Part 0",
        "Part 3",
        "Part 6",
        "Big",
        "Big",
        "Part 7",
    ]  # three parts fit in 1,000 characters, four do not; Part 6 does not join Big
    assert all(len(c.text) <= 1000 for c in chunks)
    assert_every_line_once(doc, chunks)


def test_long_sections_are_split_with_exact_ranges():
    body = "\n".join(f"line {i} " + "word " * 20 for i in range(200))
    doc = "# Big\n" + body
    chunks = chunk_markdown(doc, max_chars=1000)
    assert len(chunks) > 5
    assert all(len(c.text) <= 1000 + 200 for c in chunks)
    assert all(c.heading == "Big" for c in chunks)
    assert_every_line_once(doc, chunks)


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
