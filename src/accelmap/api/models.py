"""Models: load a preset or a config, list the presets, show one, import a Hugging Face config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accelmap.catalog import Catalog, load_catalog
from accelmap.cost.whatif import with_model_whatif
from accelmap.errors import InputError
from accelmap.models import details
from accelmap.models.schema import ModelSpec

__all__ = ["catalog_model", "context_warnings", "import_model", "list_models", "load_model",
           "model_details", "model_summary", "write_model"]


def load_model(name_or_path: str, catalog: Catalog | None = None) -> ModelSpec:
    """A preset by (forgiving) name, a file (HF config.json or a ModelSpec YAML), or a Hub repo
    id such as meta-llama/Llama-3.1-8B (needs the ``hf`` extra); with the model what-ifs of a
    catalog made by ``api.apply_whatif`` (``--set vocab_size=50304``)."""
    return with_model_whatif(catalog, _load_model(name_or_path, catalog))


def catalog_model(name: str, catalog: Catalog | None = None) -> ModelSpec:
    """A preset of the catalog by (forgiving) name only, never a file or a Hub repo: what a
    caller that must not open paths (the web app) resolves a model with."""
    from accelmap.lookup import resolve

    if not name.strip():
        raise InputError("the model is empty: give a preset id ('accelmap models list')")
    cat = catalog or load_catalog()
    return with_model_whatif(catalog, resolve(name, cat.models, "model", "accelmap models list"))


def _load_model(name_or_path: str, catalog: Catalog | None = None) -> ModelSpec:
    from accelmap.lookup import find, resolve

    if not name_or_path.strip():
        raise InputError("the model is empty: give a preset id ('accelmap models list'), a "
                         "config.json or a spec YAML")
    cat = catalog or load_catalog()
    path = Path(name_or_path).expanduser()
    looks_like_path = path.suffix in (".json", ".yaml", ".yml") or "/" in name_or_path
    exists = _exists(path)
    if exists and (looks_like_path or not find(name_or_path, cat.models)):
        if path.suffix in (".yaml", ".yml"):
            from accelmap.catalog import read_yaml, validate_entry

            data = read_yaml(path)
            if isinstance(data, dict):
                if data.get("kind", "model") != "model":
                    raise InputError(f"{path}: field 'kind': {data['kind']!r} is not a model; "
                                     "give a model spec YAML (kind: model) or a config.json")
                data = {k: v for k, v in data.items() if k != "kind"}
            return validate_entry(ModelSpec, data, str(path))
        from accelmap.models.hf import load_hf_config

        return load_hf_config(str(path))
    if looks_like_path and not exists and name_or_path.count("/") != 1:
        raise InputError(f"no such file: {name_or_path}")
    if name_or_path.count("/") == 1 and not exists and not find(name_or_path, cat.models):
        from accelmap.models.hf import load_hf_config

        return load_hf_config(name_or_path)
    return resolve(name_or_path, cat.models, "model", "accelmap models list")


def _exists(path: Path) -> bool:
    """Whether ``path`` exists; a name too long for a path (or holding NUL) is no file."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def model_summary(spec: ModelSpec) -> dict[str, Any]:
    """id, name, family, params, active_params, attention, moe, layers, d_model and
    published_params (None when no exact count is published)."""
    return details.summary(spec)


def list_models(family: str | None = None, catalog: Catalog | None = None
                ) -> list[dict[str, Any]]:
    """The summaries of the catalog's models, by family then size; ``family`` keeps those whose
    family contains it (ignoring case)."""
    cat = catalog or load_catalog()
    rows = sorted((details.summary(s) for s in cat.models.values()),
                  key=lambda r: (r["family"], r["params"]))
    if family:
        rows = [r for r in rows if family.lower() in r["family"].lower()]
    return rows


def model_details(spec: ModelSpec, seq: int | None = None) -> dict[str, Any]:
    """The summary plus the spec, parameters by part, FLOPs per token at ``seq`` (default
    min(max_seq_len, 4096)), shapes per group of identical layers and the sources."""
    return details.details(spec, seq)


def import_model(config: str, name: str | None = None) -> ModelSpec:
    """A ModelSpec from a Hugging Face config.json, a folder holding one, or a Hub repo id
    (needs the ``hf`` extra and the network). Never runs remote code."""
    from accelmap.models.hf import load_hf_config

    return load_hf_config(config, name)


def write_model(spec: ModelSpec, path: str | Path) -> Path:
    """Write ``spec`` as a catalog YAML file (``kind: model``, defaults left out), ready for a
    ``--catalog`` folder; creates the folder. Returns the path."""
    import yaml

    out = Path(path)
    if out.is_dir():
        raise InputError(f"--out {out} is a folder; give a file such as {out / 'model.yaml'}")
    data = {"kind": "model", **spec.model_dump(mode="json", exclude_defaults=True)}
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    except OSError as e:
        raise InputError(f"cannot write {out} ({e.strerror or type(e).__name__}); choose another "
                         "--out path") from None
    return out


def context_warnings(spec: ModelSpec, *, seq: int | None = None, prompt: int | None = None,
                     output: int = 0) -> list[str]:
    """A sequence past the model's context (``max_seq_len``): serving (``prompt`` +
    ``output``) is refused with the context and the flag that extends it
    (``engine.shapes.check_serving_context``); training or FLOPs at ``seq`` is context
    extension, answered with one warning line to print first."""
    from accelmap.engine.shapes import check_serving_context, context_notes

    if prompt is not None:
        check_serving_context(spec, prompt, output)
    if seq is None:
        return []
    return [f"{n} (a context extension; --set context={seq} says so and silences this)"
            for n in context_notes(spec, seq)]
