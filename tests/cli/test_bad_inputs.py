"""A corpus of bad and odd inputs across every command (tests/corpus/bad_inputs.py), each run
in-process through the real entry point with a time limit: a bad input gets exit 2 and one
short ``error:`` line (no traceback, no 'internal error', no hang), a valid one exit 0, and
nothing is silently answered. Plus property tests of the text parsers and the file reader:
whatever the input, a value or one InputError, never another exception."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelmap import api, files
from accelmap.errors import AccelmapError, InputError


def _corpus_module() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "tests" / "corpus" / "bad_inputs.py"
    spec = importlib.util.spec_from_file_location("bad_inputs", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


BAD = _corpus_module()
CASES = BAD.corpus()
CASE_TIMEOUT_S = 20.0


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    d = tmp_path_factory.mktemp("bad-inputs")
    BAD.make_files(d)
    with BAD.environment(d):
        yield d


def test_the_corpus_is_large_and_covers_every_command() -> None:
    assert len(CASES) >= 300
    commands = {c.args[0] if c.args else "" for c in CASES}
    assert {"estimate", "plan", "compare", "export", "validate", "measure", "calibrate", "hw",
            "models", "roofline"} <= commands
    subs = {f"{c.args[0]} {c.args[1]}" for c in CASES if len(c.args) > 1}
    for sub in ("measure matmul", "measure bandwidth", "measure overhead",
                "measure collectives", "measure list", "measure show", "measure export",
                "hw list", "hw show", "hw compare", "models list", "models show",
                "models import"):
        assert sub in subs, sub


# the cases in groups of ~40 (one test each: the per-test overhead of 700 tests would double
# the time); a failure lists every case of its group that was not answered clearly
GROUP = 40
GROUPS = [CASES[i:i + GROUP] for i in range(0, len(CASES), GROUP)]


@pytest.mark.parametrize("cases", GROUPS,
                         ids=[f"{g[0].id}..{g[-1].id}" for g in GROUPS])
def test_bad_input_is_answered_clearly(cases: list[object], corpus_dir: Path) -> None:
    bad = []
    for case in cases:
        out = BAD.run_case(case, corpus_dir, CASE_TIMEOUT_S)
        if out.verdict != "clear":
            text = (out.err.strip() or out.out.strip())[:300]
            bad.append(f"{out.case.id}: {out.verdict}, exit {out.code}: {text}")
    assert not bad, "\n".join(bad)


TABLE = BAD.option_table(("", "nan", "1e400", "99999999999999999999", "x" * 3000, "ü"))
TABLE_GROUPS = [TABLE[i:i + 120] for i in range(0, len(TABLE), 120)]


@pytest.mark.parametrize("cases", TABLE_GROUPS,
                         ids=[f"{g[0].id}..{g[-1].id}" for g in TABLE_GROUPS])
def test_every_option_takes_odd_values_clearly(cases: list[object], corpus_dir: Path) -> None:
    """Each option of each command with an empty, NaN, overflowing, huge, long and non-ASCII
    value: exit 0 or one clear error, never an internal error or a hang."""
    bad = []
    for case in cases:
        out = BAD.run_case(case, corpus_dir, CASE_TIMEOUT_S)
        if out.verdict != "clear":
            bad.append(f"{out.case.id}: {out.verdict}: {(out.err or out.out).strip()[:300]}")
    assert not bad, "\n".join(bad)


def test_echoed_input_is_cut(corpus_dir: Path) -> None:
    """A 40,000-character argument is echoed as ~80 characters and an ellipsis."""
    code, _, err, _ = BAD.run(["hw", "list", "--sort", "h" * 40_000])
    assert code == 2 and len(err) < 300 and "…" in err


def test_every_non_exact_name_says_what_it_resolved_to(corpus_dir: Path) -> None:
    code, out, err, _ = BAD.run(["estimate", "llama3.1-8b", "--hw", "H100 SXM", "--json"])
    assert code == 0 and json.loads(out)["model"] == "llama-3.1-8b"
    assert "note: model 'llama3.1-8b' → llama-3.1-8b" in err
    assert "note: accelerator 'H100 SXM' → h100-sxm5-80gb" in err
    code, out, err, _ = BAD.run(["estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb"])
    assert code == 0 and "note:" not in err  # exact ids: nothing to say
    code, _, err, _ = BAD.run(["estimate", "llama3.1-8b", "--cluster", "8xH100", "--tp", "16"])
    assert code == 0 and "note: accelerator 'H100' → h100-sxm5-80gb" in err  # cluster shorthand
    code, _, err, _ = BAD.run(["estimate", "llama3.1-8b", "--hw", "H100 SXM", "--batch", "0"])
    assert code == 2 and err.count("\n") == 1 and err.startswith("error:")  # errors: one line


# --- properties: any text gives a value or one InputError ---------------------------------------
TEXT = st.text(st.characters(codec="utf-8"), max_size=60)
NUMBERISH = st.one_of(TEXT, st.from_regex(r"[-+]?[0-9.eE]{0,12}\s?(ms|s|min|h|d|w|T|B|K|M|G)?",
                                          fullmatch=True))
FAST = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@FAST
@given(NUMBERISH)
def test_parsers_return_a_value_or_one_input_error(text: str) -> None:
    import math

    from accelmap.units import Dimension, parse_quantity

    for parse in (api.parse.duration, api.parse.count, api.parse.batch_tokens):
        try:
            value = parse(text)
        except InputError:
            continue
        assert math.isfinite(value) and value > 0
    with contextlib.suppress(InputError):
        assert math.isfinite(parse_quantity(text, Dimension.BYTES, require_unit=True))


@FAST
@given(TEXT)
def test_lookup_gives_one_entry_or_one_error(text: str) -> None:
    from accelmap.catalog import load_catalog

    cat = load_catalog()
    for find in (api.find_accelerator, api.find_system):
        try:
            entry = find(text, cat)
        except AccelmapError:
            continue
        assert text.strip() and entry.id  # a match needs a name


@FAST
@given(st.binary(max_size=200))
def test_any_bytes_decode_to_text_or_one_error(data: bytes) -> None:
    try:
        text = files.decode(data, "f")
    except InputError as e:
        assert "f:" in str(e)
        return
    assert "\x00" not in text


@FAST
@given(st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-10**18, 10**18), st.floats(),
                              st.text(max_size=5)),
                    lambda kids: st.one_of(st.lists(kids, max_size=3),
                                           st.dictionaries(st.text(max_size=3), kids,
                                                           max_size=3)),
                    max_leaves=20))
def test_json_reader_keeps_finite_values_only(value: object) -> None:
    text = json.dumps(value)  # NaN/Infinity appear as JSON's non-standard constants
    try:
        back = files.parse_json(text, "f.json")
    except InputError as e:
        assert "NaN" in text or "Infinity" in text, e
        return
    assert back == value


def test_a_closed_stdout_is_said_not_an_internal_error() -> None:
    """``accelmap hw list >&-``: Python's sys.stdout is None; what would be printed is
    discarded with one warning, and the command still exits 0 (exports to files still run)."""
    from accelmap.cli.app import main

    err = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(None), contextlib.redirect_stderr(err):  # type: ignore[type-var]
        try:
            main(["hw", "list"])
        except SystemExit as e:
            code = int(e.code or 0)
        finally:
            stdout = sys.stdout
    assert code == 0, err.getvalue()
    assert "internal error" not in err.getvalue()
    assert "standard output is closed" in err.getvalue()
    assert stdout is not None  # the guard put a sink in its place
