"""Which tokenizer the runtime takes: the one a model ships, never one transformers 5 invents for a
directory without tokenizer files (an empty vocabulary, or only its special tokens). A served
config-only Gemma 2 once got Gemma's five special tokens as its "tokenizer", and vLLM's benchmark,
drawing prompts from the ordinary tokens, found none (IndexError) on every attempt."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.runtime.rt_support import run_probe

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
sys.path.insert(0, sys.argv[1])
from ab_runtime.errors import UnsupportedModel
from ab_runtime.preprocess import has_ordinary_tokens, load_tokenizer
from ab_runtime.spec import RunSpec
out = {}
for label, path in json.loads(sys.argv[2]).items():
    spec = RunSpec(name=label, model_id="org/" + label, source="local", path=path, revision=None,
                   has_weights=False, task_family="causal_lm", model_class="AutoModelForCausalLM")
    try:
        tok = load_tokenizer(spec)
        out[label] = {"vocab": tok.vocab_size, "ids": tok("hello world")["input_ids"], "ordinary": has_ordinary_tokens(tok)}
    except UnsupportedModel as exc:
        out[label] = {"refused": str(exc)}
print(json.dumps(out))
"""


def test_a_shipped_tokenizer_is_taken_and_an_invented_one_is_not(torch_python: Path, tmp_path: Path) -> None:
    special_only = tmp_path / "special-only-gemma2"  # a tokenizer file that names a class and nothing else
    special_only.mkdir()
    shutil.copy(REPO / "bench" / "architecture_batch" / "tiny-gemma2" / "config.json", special_only)
    (special_only / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "GemmaTokenizer"}))
    dirs = {
        "shipped": str(REPO / "demo_models" / "tiny-llama32"),
        "config_only_gemma2": str(REPO / "bench" / "architecture_batch" / "tiny-gemma2"),
        "config_only_qwen2": str(REPO / "demo_models" / "tiny-qwen2"),
        "special_only": str(special_only),
    }
    out = run_probe(torch_python, PROBE, json.dumps(dirs))
    assert out["shipped"]["vocab"] > 200 and len(out["shipped"]["ids"]) >= 2, out["shipped"]
    for label in ("config_only_gemma2", "config_only_qwen2"):
        assert out[label]["refused"] == (
            f"the model ships no usable Tokenizer (local directory {dirs[label]}): no tokenizer files"
        ), out[label]
    # A shipped tokenizer file is taken as it is, even one of special tokens only (every text its
    # unknown token); the serving export alone needs ordinary tokens, and serves this one on token ids.
    assert out["special_only"]["vocab"] == 5 and not out["special_only"]["ordinary"], out["special_only"]
    assert out["shipped"]["ordinary"]
