"""Every exporter, one module each; importing this package registers them all."""

from accelmap.export.formats import (
    deepspeed,
    launch,
    maxtext,
    megatron,
    sglang,
    torchtitan,
    torchtune,
    vllm,
)

__all__ = ["deepspeed", "launch", "maxtext", "megatron", "sglang", "torchtitan", "torchtune",
           "vllm"]
