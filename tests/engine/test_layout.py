"""Issue 22 part 3 / issue 25: `estimate deepseek-r1 --cluster 1x8xb200 --serve --weights fp4`
took tp=1 per device and answered "does not fit". With no layout given, the engine chooses one
that holds the model (engine/layout.py) and says which."""

from __future__ import annotations

import pytest

from accelmap import api
from accelmap.catalog import Catalog
from accelmap.engine import estimate
from accelmap.engine.layout import default_serving_layout, tp_options
from accelmap.mapping.plan import Mapping


@pytest.mark.parametrize(("model", "cluster", "weights"), [
    ("deepseek-r1", "1x8xb200", "fp4"),
    ("llama-3.1-70b", "8xh100-sxm5-80gb", "bf16"),
    ("llama-3.1-405b", "2x8xh100-sxm5-80gb", "bf16"),
])
def test_default_layout_holds_the_model(catalog: Catalog, model: str, cluster: str,
                                        weights: str) -> None:
    spec = catalog.models[model]
    system = api.load_system(cluster=cluster, catalog=catalog)
    wl = api.inference(8, 2048, 256, weights=weights)
    assert not estimate(spec, system, wl, Mapping.serving(replicas=system.devices)).feasible
    e = estimate(spec, system, wl)
    assert e.feasible, e.reason
    m = e.mapping
    assert m.world <= system.devices and m.world > system.devices // 2
    assert any(a.startswith("layout chosen") for a in e.assumptions)
    # the smallest tensor-parallel group that holds it: half of it does not
    if m.pp == 1 and m.tp > 1:
        half = estimate(spec, system, wl, Mapping.serving(tp=m.tp // 2,
                                                          replicas=system.devices // m.tp))
        assert not half.feasible
    if m.pp > 1:  # no tp inside the node holds it
        assert m.tp == tp_options(spec, system.cluster, system.devices)[-1]


def test_one_device_per_replica_when_one_holds_it(catalog: Catalog) -> None:
    system = api.load_system(cluster="8xh100-sxm5-80gb", catalog=catalog)
    m, note = default_serving_layout(catalog.models["llama-3.1-8b"], system,
                                     api.inference(8, 2048, 256))
    assert (m.tp, m.pp, m.replicas) == (1, 1, 8) and note is None


def test_serving_mapping_left_out_is_none() -> None:
    assert api.serving_mapping(None, None, None, None) is None
    m = api.serving_mapping(tp=2, pp=None, ep=None, replicas=None)
    assert m is not None and (m.tp, m.pp, m.replicas) == (2, 1, 1)


@pytest.mark.parametrize("kw", [{"tp": 0}, {"tp": -1}, {"pp": 0}, {"replicas": 0}])
def test_a_given_zero_is_refused_not_read_as_left_out(kw: dict[str, int]) -> None:
    """None is "left out" (1, or the engine's layout); a given 0 or -1 is an error, never 1."""
    from accelmap.errors import InputError

    with pytest.raises(InputError, match=">= 1"):
        api.serving_mapping(**{"tp": None, "pp": None, "ep": None, "replicas": None, **kw})
    with pytest.raises(InputError):
        api.estimate_inputs(api.EstimateRequest(model="llama-3.1-8b", cluster="8xH100", **kw))
