"""The bad-input tally: every case of the corpus (tests/corpus/bad_inputs.py, which
tests/cli/test_bad_inputs.py runs as tests) through the real entry point
(``accelmap.cli.app.main``), each in a forked child; prints the tally: handled clearly / internal
errors / silent wrong answers / hangs / unclear messages / valid inputs refused.

    PYTHONPATH=src python3 benchmarks/bad_inputs.py            # the tally
    PYTHONPATH=src python3 benchmarks/bad_inputs.py -v         # and every case that is not clear
    PYTHONPATH=src python3 benchmarks/bad_inputs.py -k trace   # only cases whose id has 'trace'

Asserts nothing; prints numbers.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from collections import Counter
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus" / "bad_inputs.py"


def load_corpus() -> ModuleType:
    """tests/corpus/bad_inputs.py (a file of the tests, not a package) as module
    ``bad_inputs_corpus``."""
    spec = importlib.util.spec_from_file_location("bad_inputs_corpus", CORPUS)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up here
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    bad = load_corpus()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-v", "--verbose", action="store_true", help="print every case not clear")
    ap.add_argument("-k", default="", help="only cases whose id holds this text")
    ap.add_argument("--timeout", type=float, default=bad.TIMEOUT_S)
    ap.add_argument("-x", "--exclude", default=None,
                    help="leave out cases whose id holds this text")
    ap.add_argument("--no-table", action="store_true",
                    help="leave out the generated option x value table")
    ap.add_argument("--in-process", action="store_true",
                    help="run every case in this process (as the tests do) rather than forked")
    opts = ap.parse_args()
    cases = [c for c in bad.corpus() + ([] if opts.no_table else bad.option_table())
             if opts.k in c.id and not (opts.exclude and opts.exclude in c.id)]
    with tempfile.TemporaryDirectory(prefix="accelmap-bad-") as tmp:
        d = Path(tmp)
        bad.make_files(d)
        with bad.environment(d):
            outcomes = [bad.run_case(c, d, opts.timeout, not opts.in_process) for c in cases]
    tally = Counter(o.verdict for o in outcomes)
    if opts.verbose:
        for o in outcomes:
            if o.verdict != "clear":
                text = (o.err.strip() or o.out.strip()).replace("\n", " | ")[:240]
                print(f"{o.verdict:8} {o.case.id:40} exit={o.code} {text}")
    slow = sorted(outcomes, key=lambda o: -o.seconds)[:5]
    print(f"{len(outcomes)} cases in {sum(o.seconds for o in outcomes):.1f} s "
          f"(slowest: {', '.join(f'{o.case.id} {o.seconds:.1f} s' for o in slow)})")
    for v in bad.VERDICTS:
        print(f"  {v:9} {tally.get(v, 0):4}")
    print(f"handled clearly: {tally.get('clear', 0) / max(len(outcomes), 1):.1%}")


if __name__ == "__main__":
    sys.path.append(str(ROOT / "src"))  # after PYTHONPATH: another checkout may be tested
    main()
