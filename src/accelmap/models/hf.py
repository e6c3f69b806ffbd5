"""Import a Hugging Face ``config.json`` into a ModelSpec, one explicit mapper per ``model_type``.

No architecture is guessed from ratios: a config whose ``model_type`` has no mapper is refused
with the list of supported types. Remote code is never run; only the JSON file is read (from a
local path, or downloaded by repo id through ``huggingface_hub`` when that optional extra is
installed and the network allows).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from accelmap.errors import (
    AccelmapError,
    InputError,
    UnsupportedModelError,
    validation_message,
)
from accelmap.files import exists, load_json

# the config view and the registry sit below the mappers (models/hf_config.py); imported here
# under their old names
from accelmap.models.hf_config import _ALIASES as _ALIASES
from accelmap.models.hf_config import _MAPPERS as _MAPPERS
from accelmap.models.hf_config import HFConfig as HFConfig
from accelmap.models.hf_config import Mapper as Mapper
from accelmap.models.hf_config import register as register
from accelmap.models.schema import ModelSpec


def _load_mappers() -> None:
    # Imported for its @register side effects, lazily so `accelmap --help` stays fast.
    from accelmap.models import mappers  # noqa: F401


def supported_model_types() -> list[str]:
    """The model_types with a mapper (a mapper's further names, such as llama4_text, are
    accepted but not listed)."""
    _load_mappers()
    return sorted(set(_MAPPERS) - _ALIASES)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.+-]+", "-", text.lower()[:100]).strip("-.") or "imported-model"


def _label_from_path(origin: str) -> str:
    """'models/Llama-2-7b/config.json' -> 'Llama-2-7b'; 'fixtures/gpt2.json' -> 'gpt2'."""
    path = Path(origin)
    return path.parent.name if path.name == "config.json" else path.stem


def spec_from_hf_dict(data: dict[str, Any], origin: str, name: str | None = None) -> ModelSpec:
    """Map an already-parsed config.json dictionary to a ModelSpec."""
    _load_mappers()
    if not isinstance(data, dict):
        raise InputError(f"{origin}: a config.json must hold a JSON object")
    cfg = HFConfig(data, origin)
    mtype = cfg.model_type
    if not mtype:
        raise InputError(f"{origin}: field 'model_type' is missing; is this a config.json?")
    mapper = _MAPPERS.get(mtype)
    if mapper is None:
        raise UnsupportedModelError(
            f"{origin}: model_type {mtype[:24]!r} is not supported; supported: "
            f"{', '.join(supported_model_types())}"
        )
    try:
        fields = mapper(cfg)
    except InputError:
        # a size taken from the class default may be what broke the mapper (gpt-oss's
        # layer_types list against a default layer count): the missing key is the answer
        _refuse_size_defaults(cfg)
        raise
    _refuse_size_defaults(cfg)
    if cfg.defaulted:
        fields["notes"] = (*fields.get("notes", ()), _defaults_note(cfg))
    label = name or data.get("_name_or_path") or _label_from_path(origin) or mtype
    label = str(label).rstrip("/").split("/")[-1]  # "meta-llama/Llama-2-7b-hf" -> repo name
    fields.setdefault("id", _slug(str(label)))
    fields.setdefault("name", str(label)[:300])
    fields.setdefault("family", mtype)
    try:
        return ModelSpec.model_validate(fields)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "config"
        raise InputError(f"{origin}: {loc}: {validation_message(err)}") from None


# Keys that set how big the model is: a class default for one of these (LlamaConfig's 32
# layers and 32 heads are Llama-2-7B's) describes another model, so an absent one is refused.
# Each tuple lists the spellings the mappers read (transformers' GPT-2/GPT-J/MPT/Falcon
# attribute_map aliases them).
SIZE_KEYS = (("num_hidden_layers", "n_layer", "n_layers"),
             ("num_attention_heads", "n_head", "n_heads"))


def _refuse_size_defaults(cfg: HFConfig) -> None:
    for names in SIZE_KEYS:
        taken = next((k for k in names if k in cfg.defaulted), None)
        if taken is not None:
            raise InputError(
                f"{cfg.origin}: field {taken!r} is missing; it sets the model's size (the "
                f"{cfg.model_type[:40]!r} class default of {cfg.defaulted[taken]} is another "
                "model's): add it to the config")


def _defaults_note(cfg: HFConfig) -> str:
    """One note naming every absent key and the class default taken for it."""
    items = ", ".join(f"{k}={v!r}"[:60] for k, v in list(cfg.defaulted.items())[:20])
    more = f" and {len(cfg.defaulted) - 20} more" if len(cfg.defaulted) > 20 else ""
    return (f"config.json lacks {len(cfg.defaulted)} key(s); took the {cfg.model_type[:40]} "
            f"class defaults: {items}{more}")


def load_hf_config(path_or_repo: str, name: str | None = None) -> ModelSpec:
    """Read a config.json (file, directory holding one, or a Hub repo id) into a ModelSpec."""
    path = Path(path_or_repo).expanduser()
    if exists(path) and path.is_dir():
        path = path / "config.json"
    if exists(path):
        return spec_from_hf_dict(load_json(path, "config.json"), str(path), name)
    if re.fullmatch(r"[\w.-]+/[\w.-]+", path_or_repo):
        return spec_from_hf_dict(_download_config(path_or_repo), f"{path_or_repo}/config.json",
                                 name or path_or_repo.split("/")[-1])
    raise InputError(f"{path_or_repo!r} is neither a config.json file nor a Hub repo id "
                     "(owner/name)")


def _check_reachable(repo_id: str) -> None:
    """Fail at once when the Hub's host does not even resolve (offline, no DNS): huggingface_hub
    2.x retries a failed request five times with backoff (about 25 s) before it gives up."""
    import socket
    from urllib.parse import urlparse

    from huggingface_hub import constants

    if getattr(constants, "HF_HUB_OFFLINE", False):
        return  # the hub answers from its cache or says it is offline, at once
    host = urlparse(constants.ENDPOINT).hostname or "huggingface.co"
    try:
        socket.getaddrinfo(host, 443)
    except OSError:
        raise AccelmapError(
            f"could not download config.json of {repo_id!r}: {host} cannot be reached (no "
            "network?); pass a local config.json, or set HF_ENDPOINT to a reachable mirror"
        ) from None


def _download_config(repo_id: str) -> dict[str, Any]:
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise AccelmapError(
            f"to import {repo_id!r} by repo id, install the 'hf' extra "
            "(pip install 'accelmap[hf]'), or download its config.json and pass the file"
        ) from None
    _check_reachable(repo_id)
    try:
        local = hf_hub_download(repo_id, "config.json")  # JSON only: no remote code is run
    except Exception as e:  # network, auth, missing repo: all are user-facing
        raise AccelmapError(
            f"could not download config.json of {repo_id!r} ({type(e).__name__}); check the "
            "name, your network and HF_TOKEN for gated models, or pass a local config.json"
        ) from None
    data = load_json(local, "config.json")
    if not isinstance(data, dict):
        raise InputError(f"{repo_id}/config.json: a config.json must hold a JSON object")
    return data
