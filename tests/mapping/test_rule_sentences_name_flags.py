"""Every training rule's refusal names the flag (or run-format field) that expresses the fix
(issue: "every refusal on a published configuration names the rule and the flag")."""

from __future__ import annotations

import pytest

from accelmap.catalog import load_catalog
from accelmap.hardware.cluster import parse_cluster
from accelmap.mapping.constraints import TrainingJob, check_training
from accelmap.mapping.plan import Mapping

CAT = load_catalog()
FLAG_WORDS = ("--", "run format")


def _violations(model: str, cluster: str, batch: int, seq: int, m: Mapping) -> dict[str, str]:
    job = TrainingJob(CAT.models[model], parse_cluster(cluster, CAT), batch, seq)
    return {v.rule: v.sentence for v in check_training(job, m)}


@pytest.mark.parametrize(("model", "cluster", "batch", "seq", "mapping", "rule"), [
    ("llama-3.1-8b", "16xh100-sxm5-80gb", 64, 4096, Mapping(tp=8, pp=4), "world_size"),
    ("gpt3-1.3b", "8xh100-sxm5-80gb", 64, 2048, Mapping(tp=3, dp=1), "heads_divisible"),
    ("llama-3.1-8b", "8xh100-sxm5-80gb", 63, 4096, Mapping(tp=1, dp=8), "batch_divisible"),
    ("llama-3.1-8b", "16xh100-sxm5-80gb", 64, 4098, Mapping(tp=2, cp=2, dp=4), "cp_divides_seq"),
    ("llama-3.1-8b", "16xh100-sxm5-80gb", 64, 4096, Mapping(tp=16, dp=1), "tp_in_scale_up"),
    ("llama-3.1-8b", "8xh100-sxm5-80gb", 64, 4096, Mapping(tp=1, pp=8, dp=1, virtual_stages=3),
     "virtual_stages"),
    ("llama-3.1-8b", "8xh100-sxm5-80gb", 64, 4096, Mapping(tp=1, pp=5, dp=1), "world_size"),
    ("gpt3-125m", "16xh100-sxm5-80gb", 64, 2048, Mapping(tp=1, pp=16, dp=1),
     "layers_over_stages"),
    ("llama-3.1-8b", "8xh100-sxm5-80gb", 64, 4096, Mapping(tp=1, pp=3, dp=1),
     "pipeline_split"),
])
def test_refusal_names_its_flag(model: str, cluster: str, batch: int, seq: int, mapping: Mapping,
                                rule: str) -> None:
    found = _violations(model, cluster, batch, seq, mapping)
    assert rule in found, found
    assert any(w in found[rule] for w in FLAG_WORDS), found[rule]


def test_memory_refusal_names_the_flags_of_its_largest_item() -> None:
    from accelmap.engine import estimate
    from accelmap.workload import Inference, Training

    cl = parse_cluster("8xh100-sxm5-80gb", CAT)
    train = estimate(CAT.models["llama-3.1-70b"], cl, Training(batch=8, seq_len=4096),
                     Mapping(tp=1, dp=8, zero=0))
    assert not train.feasible and "(memory rule; the largest item" in (train.reason or "")
    assert "--zero" in (train.reason or "")
    serve = estimate(CAT.models["llama-3.1-70b"], parse_cluster("1xh100-sxm5-80gb", CAT),
                     Inference(batch=8, prompt_len=512, output_len=128))
    assert not serve.feasible and "--weights int8/fp8" in (serve.reason or "")
