"""`--ray [ADDRESS]` and $ACCELMAP_RAY on the CLI: bad input is one line and exit 2, before
any Ray starts; a bare --ray means local (``accelmap.cli.fanout``)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest

from accelmap.cli.fanout import bare_ray

SWEEP = ("sweep", "gpt2", "--hw", "h100-sxm5-80gb", "--train", "--param", "bf16=x1,x2")


def test_bare_ray_means_local() -> None:
    assert bare_ray(["sweep", "m", "--ray"]) == ["sweep", "m", "--ray", "local"]
    assert bare_ray(["sweep", "m", "--ray", "--json"]) == ["sweep", "m", "--ray", "local",
                                                            "--json"]
    assert bare_ray(["sweep", "m", "--ray", "auto"]) == ["sweep", "m", "--ray", "auto"]
    assert bare_ray(["x", "--", "--ray"]) == ["x", "--", "--ray"]


@pytest.mark.parametrize("address", ["nonsense", "ray://", "head:notaport"])
def test_malformed_address(cli: Callable[..., Any], address: str) -> None:
    r = cli(*SWEEP, "--ray", address)
    assert r.code == 2
    assert r.err.count("\n") == 1 and "give local, auto, ray://HOST:PORT" in r.err


def test_env_var_is_read(cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCELMAP_RAY", "not an address")
    r = cli(*SWEEP)
    assert r.code == 2 and "--ray 'not an address'" in r.err


def test_ray_not_installed(cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    for args in (SWEEP, ("compare", "gpt2", "--hw", "h100-sxm5-80gb,mi300x"),
                 ("validate", "--cases", "tests/fixtures/measurements/matmul.csv")):
        r = cli(*args, "--ray")
        assert r.code == 2, (args, r.err)
        assert r.err.strip() == ("error: --ray needs Ray, which is not installed: pip install "
                                 "'accelmap[ray]' (or pip install 'ray[client]')")


def test_unreachable_cluster(cli: Callable[..., Any]) -> None:
    pytest.importorskip("ray", reason="the connect check runs after Ray is imported")
    r = cli(*SWEEP, "--ray", "ray://127.0.0.1:1")
    assert r.code == 2 and r.err.count("\n") == 1
    assert "--ray ray://127.0.0.1:1: cannot reach it" in r.err


def test_over_the_cap_says_ray(cli: Callable[..., Any]) -> None:
    r = cli(*SWEEP[:-1], "memory_bandwidth=1TB/s..8TB/s:401")
    assert r.code == 2 and "sweep at most 400 (with --ray, 200000)" in r.err
