"""The merge alone (sync/merge.py): deterministic, no write lost, conflicts named."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from memvault.sync.merge import (
    DIRECTORY,
    FILE,
    Op,
    Version,
    conflict_id,
    conflict_name,
    merge,
)

NAMES = {"aa": "laptop", "bb": "desk", "cc": "server"}
T0 = 1_764_800_000_000  # ms


def v(ms: int, device: str, counter: int = 0) -> Version:
    return Version(((T0 + ms) << 16) | counter, device)


def put(memory, version, base, path, kind=FILE) -> Op:
    return Op(memory, version, base, False, kind, path)


def delete(memory, version, base) -> Op:
    return Op(memory, version, base, True)


def tree(ops) -> dict[str, str]:
    return {p.path: p.memory for p in merge(ops, NAMES).values()}


def test_a_linear_history_ends_at_its_last_change():
    a1, a2, a3 = v(1, "aa"), v(2, "bb"), v(3, "aa")
    ops = [put("m", a1, None, "x.md"), put("m", a2, a1, "y.md"), put("m", a3, a2, "z.md")]
    assert tree(ops) == {"z.md": "m"}
    assert tree([*ops, delete("m", v(4, "bb"), a3)]) == {}


def test_concurrent_edits_both_survive_and_the_later_keeps_the_name():
    base = v(1, "aa")
    ours, theirs = v(5, "aa"), v(7, "bb")
    ops = [
        put("m", base, None, "n.md"),
        put("m", ours, base, "n.md"),
        put("m", theirs, base, "n.md"),
    ]
    result = merge(ops, NAMES)
    assert result["m"].version == theirs
    copy = result[conflict_id("m", ours)]
    assert copy.path == conflict_name("n.md", "laptop", ours.wall_ms)
    assert copy.path.startswith("n (conflict from laptop ") and copy.path.endswith(").md")
    assert copy.version == ours


def test_an_edit_concurrent_with_a_delete_survives_as_a_copy_when_the_delete_is_later():
    base = v(1, "aa")
    edit, gone = v(2, "bb"), v(3, "aa")
    ops = [put("m", base, None, "n.md"), put("m", edit, base, "n.md"), delete("m", gone, base)]
    result = merge(ops, NAMES)
    assert "m" not in result
    assert [p.version for p in result.values()] == [edit]
    # the later edit simply wins over an earlier delete
    ops = [
        put("m", base, None, "n.md"),
        delete("m", v(2, "aa"), base),
        put("m", v(3, "bb"), base, "n.md"),
    ]
    assert tree(ops) == {"n.md": "m"}


def test_a_conflict_copy_is_edited_and_deleted_like_any_memory():
    base, ours, theirs = v(1, "aa"), v(2, "aa"), v(3, "bb")
    ops = [
        put("m", base, None, "n.md"),
        put("m", ours, base, "n.md"),
        put("m", theirs, base, "n.md"),
    ]
    copy = conflict_id("m", ours)
    renamed = put(copy, v(4, "aa"), ours, "kept.md")
    assert tree([*ops, renamed]) == {"n.md": "m", "kept.md": copy}
    assert tree([*ops, renamed, delete(copy, v(5, "bb"), v(4, "aa"))]) == {"n.md": "m"}
    # a later change that saw both heads leaves the copy alone
    later = put("m", v(6, "aa"), theirs, "n.md")
    assert set(tree([*ops, later])) == {"n.md", merge(ops, NAMES)[copy].path}


def test_two_memories_on_one_path_the_later_keeps_it():
    first, second = v(1, "aa"), v(2, "bb")
    result = merge([put("m1", first, None, "d/n.md"), put("m2", second, None, "d/n.md")], NAMES)
    assert result["m2"].path == "d/n.md"
    assert result["m1"].path == conflict_name("d/n.md", "laptop", first.wall_ms)


def test_a_file_where_a_directory_is_needed_takes_a_conflict_name():
    result = merge([put("f", v(1, "aa"), None, "a"), put("g", v(2, "bb"), None, "a/b.md")], NAMES)
    assert result["g"].path == "a/b.md"
    assert result["f"].path == conflict_name("a", "laptop", v(1, "aa").wall_ms)
    result = merge([put("f", v(3, "aa"), None, "a"), put("g", v(2, "bb"), None, "a/b.md")], NAMES)
    assert result["f"].path == "a"
    assert result["g"].path.startswith("a (conflict from desk ") and result["g"].path.endswith(
        "/b.md"
    )


def test_directories_made_on_two_devices_are_one():
    d = "dirmemory"
    result = merge(
        [put(d, v(1, "aa"), None, "x", DIRECTORY), put(d, v(2, "bb"), None, "x", DIRECTORY)], NAMES
    )
    assert [(p.path, p.kind) for p in result.values()] == [("x", DIRECTORY)]


def _history(seed: int, n: int = 60) -> list[Op]:
    """Random concurrent histories of a few memories on three devices."""
    rnd = random.Random(seed)
    devices = ["aa", "bb", "cc"]
    seen: dict[str, dict[str, Version | None]] = {d: {} for d in devices}
    ops: list[Op] = []
    clock = 0
    for _ in range(n):
        clock += rnd.randint(0, 3)
        device = rnd.choice(devices)
        memory = f"m{rnd.randint(0, 5)}"
        version = v(clock, device, rnd.randint(0, 3))
        base = seen[device].get(memory)
        if base is not None and rnd.random() < 0.2:
            op = delete(memory, version, base)
        else:
            op = put(memory, version, base, f"d{rnd.randint(0, 2)}/n{rnd.randint(0, 3)}.md")
        ops.append(op)
        seen[device][memory] = version
        if rnd.random() < 0.3:  # a sync: another device learns this one's latest
            other = rnd.choice(devices)
            seen[other][memory] = version
    return list({o.version: o for o in ops}.values())


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.randoms(use_true_random=False))
def test_the_result_depends_on_the_changes_only(seed, rnd):
    ops = _history(seed)
    expected = merge(ops, NAMES)
    shuffled = list(ops)
    rnd.shuffle(shuffled)
    assert merge(shuffled, NAMES) == expected
    placed = [p.path for p in expected.values()]
    assert len(placed) == len(set(placed))  # one memory per path


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000))
def test_no_head_is_lost(seed):
    """Every version nothing was built on, unless it is a deletion, is in the tree."""
    ops = _history(seed)
    result = merge(ops, NAMES)
    kept = {p.version for p in result.values()}
    built_on = {(o.memory, o.base) for o in ops if o.base is not None}
    for op in ops:
        if not op.deleted and (op.memory, op.version) not in built_on:
            assert op.version in kept
