"""Fuzzing the command line: hypothesis builds argument lists from every command's real option
names (read from the typer app) with values that are sometimes right and often not -- catalog
names, sizes, durations, huge and negative numbers, nan, unicode, an undecodable byte as
Python sees one in sys.argv, empty strings, stray options -- and runs them in-process through
``accelmap.cli.app.main``. Whatever the input, the CLI answers with exit 0 or a one-line error
(exit 1 or 2); never a traceback or an "internal error" (500 examples, the `ci` profile's
fixed draws).

Commands that measure the machine (measure matmul/bandwidth/overhead/collectives, validate
--local) are left out: they run benchmarks, not parsing. Runs happen in a scratch folder with a
scratch measurement store, so paths the fuzz invents stay there.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelmap.cli.app import build_app

SLOW_S = 60  # one command line may take this long (a plan search); longer is a finding
SKIP_COMMANDS = {("measure", "matmul"), ("measure", "bandwidth"), ("measure", "overhead"),
                 ("measure", "collectives"), ("measure", "attention"),
                 # a server runs until stopped; a design search and a sweep run for seconds
                 ("serve",), ("design",), ("sweep",)}
SKIP_OPTIONS = {"--local"}


def _commands() -> dict[tuple[str, ...], tuple[list[tuple[list[str], bool]], int]]:
    """Command path -> (its options as (names, is_flag), its number of arguments)."""
    out = {}

    def walk(cmd: Any, path: tuple[str, ...]) -> None:
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                walk(sub, (*path, name))
        elif path not in SKIP_COMMANDS:
            opts = [([*p.opts, *p.secondary_opts], bool(getattr(p, "is_flag", False)))
                    for p in cmd.params
                    if p.param_type_name == "option" and not set(p.opts) & SKIP_OPTIONS]
            nargs = sum(p.param_type_name == "argument" for p in cmd.params)
            out[path] = (opts, nargs)

    walk(typer.main.get_command(build_app()), ())
    return out


COMMANDS = _commands()

NAMES = ["llama-3.2-1b", "gpt3-125m", "mixtral-8x7b", "deepseek-v3", "h100", "h100-sxm5-80gb",
         "tpu-v5p", "mi300x", "groq-lpu-v1", "8xH100", "2xH100", "dgx-h100", "0xH100",
         "99999999999xH100", "-1xH100", "deepspeed", "vllm", "megatron", "maxtext"]
NUMBERS = ["0", "-1", "1", "2", "3", "8", "1.5", "-0", "nan", "inf", "-inf", "1e309", "1e-300",
           str(2**63), str(10**30), "0x10", "1_000", "1e3", "2M", "2T", "256K", "80GB",
           "1.5TB/s", "2s", "500ms", "-5ms", "60d", "1e400w", "0.0"]
WORDS = ["", " ", "-", "--", "=", "%s", "{}", "[", "'", '"', "\\", "日本語", "\u202e", "🤖",
         "\udcff",  # a byte that is not UTF-8, as sys.argv carries it (surrogateescape)
         "a" * 300, "x,y", ",", "q,,v", "all-linear", "bf16", "fp8", "int4", "nf4", "none",
         "full", "selective", "auto", "offline", "server", "train", "serve", "lora", "qlora",
         "decode", "prefill", "throughput", "cost", ".", "plan.json", "out"]
STRAY = ["--bogus", "-x", "--json", "--help", "-h", "--", "--hw=", "--json=1"]


def _safe(text: str) -> bool:
    """Paths stay inside the scratch folder: nothing absolute, no '..', no '~'."""
    return not text.startswith(("/", "~")) and ".." not in text and "\x00" not in text


values = st.one_of(
    st.sampled_from(NAMES + NUMBERS + WORDS),
    st.integers(-(10**20), 10**20).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
            max_size=12),
).filter(_safe)


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    path = draw(st.sampled_from(sorted(COMMANDS)))
    opts, nargs = COMMANDS[path]
    argv = list(path)
    if nargs and draw(st.integers(0, 9)) < 8:
        argv.append(draw(st.sampled_from(NAMES)))
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.integers(0, 9))
        if kind < 6 and opts:
            names, flag = draw(st.sampled_from(opts))
            name = draw(st.sampled_from(names))
            if flag:
                argv.append(name)
            elif draw(st.integers(0, 6)) == 0:
                argv.append(f"{name}={draw(values)}")
            else:
                argv += [name, draw(values)]
        elif kind < 9:
            argv.append(draw(values))
        else:
            argv.append(draw(st.sampled_from(STRAY)))
    return argv


class TooSlow(BaseException):
    """Raised by the alarm; not an Exception, so main() cannot swallow it as a bug."""


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ACCELMAP_DB", str(tmp_path / "measurements.sqlite"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("ACCELMAP_DEBUG", raising=False)

    def alarm(*_: Any) -> None:
        raise TooSlow

    old = signal.signal(signal.SIGALRM, alarm)
    yield tmp_path
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


# The scratch folder and the CLI runner live across examples (files one command line writes
# may be read by a later one, as on a real disk): hence the function-scoped fixture check off.
@settings(max_examples=500, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=command_lines())
def test_cli_never_fails_with_a_traceback(argv: list[str], cli: Callable[..., Any],
                                          scratch: Path) -> None:
    signal.alarm(SLOW_S)
    try:
        r = cli(*argv)
    except TooSlow:
        pytest.fail(f"accelmap {argv!r} ran over {SLOW_S} s")
    finally:
        signal.alarm(0)
    assert r.code in (0, 1, 2), (argv, r.code, r.err[-500:])
    assert "internal error" not in r.err, (argv, r.err[-500:])
    assert "Traceback" not in r.err + r.out, (argv, r.err[-2000:])
    if r.code:
        assert r.err.strip(), (argv, "an error exit says why")


LONG = "a" * 300  # longer than a file name may be (ENAMETOOLONG)


@pytest.mark.parametrize("argv", [
    ["estimate", LONG, "--hw", "h100-sxm5-80gb"],
    ["models", "show", LONG],
    ["models", "import", LONG],
    ["compare", LONG],
    ["export", "vllm", "--from", LONG],
    ["validate", "--cases", LONG],
    ["hw", "list", "--catalog", LONG],
    ["measure", "show", "x", "--db", LONG],
    ["estimate", "llama-3.2-1b", "--hw", "h100-sxm5-80gb", "--serve", "--trace", LONG],
    ["estimate", "binary", "--hw", "h100-sxm5-80gb"],  # a file that is not UTF-8 text
    ["models", "import", "binary"],
    ["export", "vllm", "--from", "binary"],
    ["hw", "list", "--catalog", "catalog"],  # holds a YAML file that is not UTF-8
    # an argument that is not UTF-8 (a lone surrogate, PEP 383) in the error sentence
    ["advise", "llama-3.2-1b", "--hw=llama-3.2-1b", "\udcff"],
    ["report", "llama-3.2-1b", "--out=\udcff"],
    ["hw", "compare", "llama-3.2-1b", "--catalog=\udcff"],
    ["export", "llama-3.2-1b", "--from=\udcff"],
], ids=lambda a: ascii(" ".join(x[:12] for x in a)).strip("'"))
def test_found_by_the_fuzz(argv: list[str], cli: Callable[..., Any], scratch: Path) -> None:
    """Each was an internal error: a path too long for the file system, a file that is not
    UTF-8 text."""
    (scratch / "binary").write_bytes(b"\xfb\xfc\x00 not text")
    (scratch / "catalog").mkdir()
    (scratch / "catalog" / "x.yaml").write_bytes(b"kind: \xfb\xfc")
    r = cli(*argv)
    assert r.code == 2 and "internal error" not in r.err, r.err
    assert r.err.startswith("error: ") and r.err.count("\n") == 1, r.err
