"""The safe, line-aware YAML reader: values, locations, and what it refuses."""

from __future__ import annotations

from engine.loader.yamlread import MAX_NODES, parse


def _ok(text: str):
    doc, problems = parse("f.yaml", text.encode())
    assert problems == []
    return doc


def test_values_and_locations():
    doc = _ok("a: 1\nb:\n  - x\n  - {c: 2.5}\n")
    assert doc.data == {"a": 1, "b": ["x", {"c": 2.5}]}
    assert doc.loc(("a",)) == (1, 4)
    assert doc.loc(("a",), key=True) == (1, 1)
    assert doc.loc(("b", 1, "c")) == (4, 9)
    assert doc.loc(("b", 1, "c"), key=True) == (4, 6)
    # an absent path falls back to its closest written ancestor
    assert doc.loc(("b", 1, "zzz")) == (4, 5)


def test_timestamps_stay_strings_and_core_types_resolve():
    doc = _ok("d: 2024-01-01\nt: true\nn: null\no: 0x1F\ns: '7'\n")
    assert doc.data == {"d": "2024-01-01", "t": True, "n": None, "o": 31, "s": "7"}


def test_small_aliases_are_fine():
    doc = _ok("base: &b {x: 1}\nuse: *b\nlist: [*b, *b]\n")
    assert doc.data["use"] == {"x": 1} and doc.data["list"] == [{"x": 1}, {"x": 1}]


def test_alias_limit_is_about_expansion_not_file_size():
    width = 30
    levels = ["l0: &l0 [" + ", ".join(["v"] * width) + "]"]
    for i in (1, 2):  # l2 expands to 1 + 30 * (1 + 30 * 31) = 27,931 nodes
        levels.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i-1}"] * width) + "]")
    # the three anchored lists hold ~28.9k nodes; two more copies of l2 make ~84.8k: accepted
    doc, problems = parse("f.yaml", "\n".join(levels + ["l3: [*l2, *l2]"]).encode())
    assert problems == [] and len(doc.data["l3"][1]) == width
    # a third copy crosses 100k: refused, at that alias
    doc, problems = parse("f.yaml", "\n".join(levels + ["l3: [*l2, *l2, *l2]"]).encode())
    assert doc is None
    assert problems[0].message == f"aliases expand the document beyond {MAX_NODES} nodes (alias bomb)"
    assert (problems[0].line, problems[0].column) == (4, 16)


def test_bom_is_tolerated():
    assert _ok("\ufeffa: 1\n").data == {"a": 1}


def test_all_duplicate_keys_are_reported():
    doc, problems = parse("f.yaml", b"a: 1\nb: 2\na: 3\nb: 4\n")
    assert doc is not None and doc.data == {"a": 1, "b": 2}  # (the first values: read on, for the
    # document's other problems; never valid while it has these)
    assert [(p.line, p.message) for p in problems] == [
        (3, "duplicate key 'a' (first written on line 1)"),
        (4, "duplicate key 'b' (first written on line 2)"),
    ]


def test_non_utf8_in_a_later_line_is_located():
    _, problems = parse("f.yaml", b"a: 1\nb: ok\nc: \xff\xfe\n")
    assert [(p.line, p.column) for p in problems] == [(3, 4)]
