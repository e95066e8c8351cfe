"""``ferrax.core.parse_jaxpr`` is strict: malformed text raises ``ferrax.ParseError`` with
the line and column of the problem, never a ``TypeCheckError``, even when the text also
has a type error before the syntax error (the Rust tests in rust/ir/tests/malformed.rs
go through every class over a larger corpus)."""

from __future__ import annotations

import re

import pytest

from ferrax import ParseError, TypeCheckError
from ferrax.core import parse_jaxpr

VALID = """{ lambda ; a:f32[3] b:i32[]. let
    c:f32[3] = sin a
    d:f32[] = reduce_sum[axes=(0,) out_sharding=None] c
    e:i32[] = cond[
      branches=(
        { lambda ; f:i32[]. let g:i32[] = neg f in (g,) }
        { lambda ; h:i32[]. let i:i32[] = add h 1:i32[] in (i,) }
      )
    ] b b
  in (d, e) }"""

TOKEN = re.compile(r"[{}()\[\],;=:]|[^\s{}()\[\],;=:]+")


def _tokens(text: str) -> list[re.Match[str]]:
    return list(TOKEN.finditer(text))


def _truncations(text: str) -> list[str]:
    return [text[: m.end()] for m in _tokens(text)[:-1]]


def _bracket_edits(text: str) -> list[str]:
    out = []
    for m in _tokens(text):
        if m.group() in "{}()[]":
            out.append(text[: m.start()] + text[m.end() :])  # deleted
            out.append(text[: m.start()] + m.group() * 2 + text[m.end() :])  # doubled
    return out


def _keyword_names(text: str) -> list[str]:
    out = []
    for i, name in enumerate(["a", "c", "d", "f"]):
        kw = ["in", "let", "lambda", "in"][i]
        out.append(re.sub(rf"\b{name}\b", kw, text))
    return out


CLASSES: dict[str, list[str]] = {
    "empty": ["", "   ", "\n\n"],
    "truncated": _truncations(VALID),
    "bracket": _bracket_edits(VALID),
    "misplaced keyword": ["{ lambda ; a:f32[]. let b:f32[] = sin a in d,) }", "{ let ; a:f32[]. let in (a,) }"],
    "garbage after": [VALID + tail for tail in ("}", " x", " {", " (a,)")],
    "unterminated params": [VALID.replace("(0,) out_sharding=None]", "(0,) out_sharding=None")],
    "bad type": [VALID.replace("a:f32[3]", bad, 1) for bad in ("a:f32[3", "a:f32[3,]", "a:f33[3]", "a:f32[-1]", "a:f32")],
}


def _inside(text: str, line: int, column: int) -> bool:
    lines = text.split("\n")
    return 1 <= line <= len(lines) and 1 <= column <= len(lines[line - 1]) + 1


def test_valid_source_parses() -> None:
    j = parse_jaxpr(VALID)
    assert [e.primitive for e in j.eqns] == ["sin", "reduce_sum", "cond"]


@pytest.mark.parametrize("cls", sorted(CLASSES))
def test_malformed_text_raises_parse_error(cls: str) -> None:
    mutants = CLASSES[cls]
    assert mutants
    for text in mutants:
        with pytest.raises(ParseError) as info:
            parse_jaxpr(text)
        e = info.value
        assert _inside(text, e.line, e.column), (cls, text, e.line, e.column)
        assert f"line {e.line}, column {e.column}" in str(e)


def test_keywords_name_variables_as_jax_names_them() -> None:
    """JAX names its 222nd variable `in`: a keyword is a variable where one stands, so
    every variable renamed to a keyword reads as the same jaxpr."""
    want = str(parse_jaxpr(VALID))
    for text in _keyword_names(VALID):
        assert str(parse_jaxpr(text)) == want, text


def test_issue_example_points_at_the_bad_token() -> None:
    with pytest.raises(ParseError) as info:
        parse_jaxpr("{ lambda ; a:f32[]. let b:f32[] = sin a in d,) }")
    assert (info.value.line, info.value.column) == (1, 44)
    assert "'(' after 'in'" in str(info.value)


def test_syntax_error_wins_over_an_earlier_type_error() -> None:
    ill_typed = VALID.replace("c:f32[3] = sin a", "c:f32[3] = sin zz")
    with pytest.raises(TypeCheckError, match="zz"):
        parse_jaxpr(ill_typed)
    start = ill_typed.index("zz") + 2
    late = [t for t in _truncations(ill_typed) if len(t) > start]
    late += [m for m in _bracket_edits(ill_typed) if m[:start] == ill_typed[:start]]
    assert len(late) > 20
    for text in late:
        with pytest.raises(ParseError):
            parse_jaxpr(text)
