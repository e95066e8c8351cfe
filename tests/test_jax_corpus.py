"""The corpus of JAX-printed jaxprs (rust/ir/tests/jax_corpus, written by
scripts/jax_corpus.py): the checked-in files are exactly what JAX prints today for the
script's programs, there are at least 100 of them, each parses (and typechecks) with
``ferrax.core.parse_jaxpr`` and prints back byte for byte, and ``ferrax.make_jaxpr`` of
the same program (its source run with ferrax's API) prints JAX's text.

Two lists are asserted exactly, so that they cannot go stale: ``PARSE_FAILS_TODAY``, the
files that do not yet read back identically, and ``TRACE_DIFFERS``, the programs whose
ferrax trace differs from JAX's, each with the (first) reasons found."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from ferrax.core import parse_jaxpr

pytest.importorskip("jax")

ROOT = Path(__file__).resolve().parent.parent


def _load_corpus_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("jax_corpus", ROOT / "scripts" / "jax_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["jax_corpus"] = module
    spec.loader.exec_module(module)
    return module


corpus = _load_corpus_script()
CORPUS_DIR: Path = corpus.CORPUS_DIR
NAMES: list[str] = sorted(corpus.PROGRAMS)


def _checked_in(name: str) -> str:
    return (CORPUS_DIR / f"{name}.jaxpr").read_text()


# Files that ferrax does not yet read back as JAX wrote them (none: every file does).
PARSE_FAILS_TODAY: set[str] = set()

# Why ferrax's trace of a program still differs from JAX's text.
ZERO_CT_BEFORE_SCAN = (
    "the zero tangent of the scan's initial carry (ad.instantiate in the scan JVP) is a known value "
    "to the partial evaluation, so its broadcast_in_dim is emitted before the forward scan, where "
    "JAX's is after it"
)

TRACE_DIFFERS: dict[str, str] = {
    "elu_leaky_relu_grad": (
        "the known half of a split jit returns its residuals in another order than JAX's, and the "
        "splits and transposes of one nested jit in two calls are not shared `let` jaxprs as JAX's"
    ),
    "scan_rnn_grad": ZERO_CT_BEFORE_SCAN,
    "checkpoint_scan_layers": ZERO_CT_BEFORE_SCAN,
}


def test_the_files_are_what_jax_prints_today() -> None:
    texts: dict[str, str] = corpus.generate(corpus.jax_api())
    on_disk = {p.name: p.read_text() for p in CORPUS_DIR.glob("*.jaxpr")}
    assert sorted(on_disk) == sorted(texts), "run `python scripts/jax_corpus.py`"
    stale = sorted(name for name, text in texts.items() if on_disk[name] != text)
    assert not stale, f"differ from JAX's output (run `python scripts/jax_corpus.py`): {stale}"
    for text in texts.values():
        assert text.endswith("}\n") and not text.endswith("\n\n")


def test_the_readme_states_how_many_programs_trace_as_jax() -> None:
    import re

    readme = (ROOT / "README.md").read_text()
    m = re.search(r"prints JAX's text, byte for byte, for\s+(\d+) of the (\d+)", readme)
    assert m is not None, "README: the count of programs traced as JAX's"
    assert (int(m.group(1)), int(m.group(2))) == (len(NAMES) - len(TRACE_DIFFERS), len(NAMES))


def test_the_corpus_is_large_and_the_lists_name_its_programs() -> None:
    assert len(list(CORPUS_DIR.glob("*.jaxpr"))) >= 100
    assert PARSE_FAILS_TODAY <= set(NAMES)
    assert set(TRACE_DIFFERS) <= set(NAMES)
    # Short programs print on one line, long ones wrap.
    one_line = [n for n in NAMES if _checked_in(n).count("\n") == 1]
    assert one_line and len(one_line) < len(NAMES)


def _reads_back(text: str) -> str | None:
    """None if ferrax reads `text` (parsing and typechecking it) and prints it back
    identically, else what went wrong."""
    try:
        back = str(parse_jaxpr(text))
    except Exception as e:  # ParseError or TypeCheckError: reported, not raised
        return f"{type(e).__name__}: {e}"
    if back == text:
        return None
    ours, theirs = back.splitlines(), text.splitlines()
    line = next((i for i, (a, b) in enumerate(zip(theirs, ours)) if a != b), min(len(ours), len(theirs)))
    return f"line {line + 1}: JAX {theirs[line:line + 1]}, ferrax {ours[line:line + 1]}"


@pytest.mark.parametrize("name", NAMES)
def test_parses_and_prints_back_byte_for_byte(name: str) -> None:
    text = _checked_in(name)[:-1]
    problem = _reads_back(text)
    if name in PARSE_FAILS_TODAY:
        assert problem is not None, f"{name} now reads back: remove it from PARSE_FAILS_TODAY"
    else:
        assert problem is None, problem


@pytest.mark.parametrize("name", NAMES)
def test_ferrax_traces_the_program_as_jax(name: str) -> None:
    import ferrax

    want = _checked_in(name)
    api = corpus.Api(ferrax)
    try:
        got: str | None = corpus.trace(api, name)
    except Exception:  # a program ferrax cannot trace differs (the reason says so)
        if name not in TRACE_DIFFERS:
            raise
        got = None
    if name in TRACE_DIFFERS:
        assert got != want, f"{name} now traces as JAX: remove it from TRACE_DIFFERS"
    else:
        assert got == want
