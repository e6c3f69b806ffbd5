"""One mapper per Hugging Face ``model_type``: config.json keys -> ModelSpec fields.

Each mapper reads exactly the keys its architecture's ``transformers`` configuration class
defines (names and defaults from that class), so the mapping is explicit and reviewable.
Importing this package registers them all (see :func:`accelmap.models.hf_config.register`).
"""

from accelmap.models.mappers import deepseek, gpt_family, llama, rope_family, served

__all__ = ["deepseek", "gpt_family", "llama", "rope_family", "served"]
