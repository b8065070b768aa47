"""Export the package's model for serving: its weights saved once as safetensors, and the CPU
float32 reference the served answers are compared with.

The weights are the reference's own (real, or config-initialised from the recipe's seed by the
package's loader, `ab_runtime.harness.load_reference`), so the server never runs different weights
from the reference (never vLLM's `--load-format dummy`). The reference: greedy token ids for seeded
prompts (generation families; EOS does not stop it, as the server's requests ask `ignore_eos`), or
the package's own pooled, normalised sentence embeddings of fixed texts (embedding families), or the
classifier's logits of fixed texts (sequence classification) and of (query, document) pairs
(rerankers), each run alone (no padding), as transformers computes them. A tokenizer with a chat template adds the chat reference: a conversation, the prompt ids its
template gives, and their greedy tokens (the served /v1/chat/completions must answer them).

    python -m ab_runtime.serve.export --spec adaptation.json --out serve/weights \
        --reference serve/reference.json --prompts 3 --prompt-len 8 --new-tokens 8
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from ..device import select_device
from ..errors import UnsupportedModel
from ..families import get_family
from ..fileops import write_text_atomic
from ..harness import load_reference
from ..inputs import Signature, forward_flags
from ..preprocess import has_ordinary_tokens, load_tokenizer, tokenize
from ..result import Result, run_main
from ..spec import load_spec

GENERATION_FAMILIES = ("causal_lm", "image_text_to_text")
TEXTS = ("The weather is lovely today.", "It is sunny outside!", "He drove to the stadium.")
FIRST_TOKEN_ID = 3  # below it lie the special tokens of most vocabularies (pad, bos, eos)
CHAT = ({"role": "user", "content": TEXTS[0]},)
QUERY = "Where is the weather lovely?"  # the reranker's query; TEXTS are its documents


def seeded_prompts(seed: int, count: int, length: int, vocab: int) -> list[list[int]]:
    """`count` prompts of `length` token ids drawn from the seed (the same in every process)."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(FIRST_TOKEN_ID, vocab, (count, length), generator=generator)
    return [row.tolist() for row in ids]


def greedy_tokens(model: Any, prompts: list[list[int]], new_tokens: int) -> list[list[int]]:
    """Greedy continuation of each prompt, one at a time (no padding), EOS not stopping it."""
    model.generation_config.eos_token_id = None
    out = []
    with torch.inference_mode():
        for prompt in prompts:
            ids = torch.tensor([prompt])
            generated = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                do_sample=False,
                pad_token_id=0,
            )
            out.append(generated[0, len(prompt) :].tolist())
    return out


def chat_reference(tokenizer: Any, model: Any, new_tokens: int) -> dict[str, Any] | None:
    """The chat reference when the tokenizer has a chat template: the messages, the prompt ids the
    template gives (as the server applies it) and their greedy tokens; None without a template."""
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        return None
    encoded = tokenizer.apply_chat_template(list(CHAT), add_generation_prompt=True, tokenize=True)
    prompt = list(encoded["input_ids"] if isinstance(encoded, Mapping) else encoded)
    return {"messages": list(CHAT), "prompt": prompt, "tokens": greedy_tokens(model, [prompt], new_tokens)[0]}


def embeddings(spec: Any, model: Any) -> list[list[float]]:
    """The package's sentence embeddings of TEXTS (its pooling, mean when it names none; normalised)."""
    family = get_family(spec.task_family)
    accepted = Signature.of(model).accepted
    batch = {k: v for k, v in tokenize(spec, list(TEXTS)).items() if k in accepted}
    with torch.inference_mode():
        named = family.named_outputs(
            model(**batch, **forward_flags(model)), batch, spec.sentence_transformers_pooling or "mean", True
        )
    return [[float(x) for x in row] for row in named["sentence_embedding"].float()]


def logits(spec: Any, model: Any, texts: list[str], pairs: list[str] | None = None) -> list[list[float]]:
    """The classifier's float32 logits of each text (or each (text, pair) as the tokenizer joins a
    pair, as vLLM's cross-encoder scoring does), one at a time: no padding."""
    tokenizer = load_tokenizer(spec)
    accepted = Signature.of(model).accepted
    out = []
    with torch.inference_mode():
        for i, text in enumerate(texts):
            encoded = tokenizer(text, text_pair=pairs[i] if pairs else None, return_tensors="pt")
            batch = {k: v for k, v in encoded.items() if k in accepted}
            out.append([float(x) for x in model(**batch).logits[0].float()])
    return out


def copy_sentence_transformers(spec: Any, out: Path) -> bool:
    """Copy a local model's sentence-transformers description (modules.json and the modules' small
    JSON configs, e.g. 1_Pooling) next to the weights, so the engine pools and normalises as the
    reference does; False when the model has none."""
    source = Path(spec.path) if spec.path else None
    if source is None or not (source / "modules.json").is_file():
        return False
    for name in ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json"):
        if (source / name).is_file():
            shutil.copyfile(source / name, out / name)
    for module in json.loads((source / "modules.json").read_text()):
        folder = source / str(module.get("path") or "")
        if module.get("path") and folder.is_dir():
            (out / folder.name).mkdir(exist_ok=True)
            for config in folder.glob("*.json"):
                shutil.copyfile(config, out / folder.name / config.name)
    return True


def export(args: argparse.Namespace) -> Result:
    spec = load_spec(Path(args.spec))
    loaded = load_reference(spec, select_device("cpu"), args.use_pretrained)
    model = loaded.model
    out = Path(args.out)
    model.save_pretrained(out, safe_serialization=True)
    try:
        tokenizer = load_tokenizer(spec)
        if not has_ordinary_tokens(tokenizer):
            raise UnsupportedModel("a tokenizer of special tokens only: nothing to draw benchmark prompts from")
        tokenizer.save_pretrained(out)
    except (UnsupportedModel, OSError, ValueError):
        tokenizer = None  # served on token ids (--skip-tokenizer-init)
    has_tokenizer = tokenizer is not None
    pooled_as_sentence_transformers = copy_sentence_transformers(spec, out)
    st_config = out / "sentence_bert_config.json"
    reference: dict[str, Any] = {
        "family": spec.task_family,
        "mode": loaded.mode,
        "tokenizer": has_tokenizer,
        "sentence_transformers": pooled_as_sentence_transformers,
        # the engine takes a sentence-transformers model's max_seq_length as its limit
        "max_seq_length": json.loads(st_config.read_text()).get("max_seq_length") if st_config.is_file() else None,
        "parameters": sum(p.numel() for p in model.parameters()),
        "config": json.loads((out / "config.json").read_text()),
    }
    if spec.task_family in GENERATION_FAMILIES:
        vocab = int(loaded.config.get_text_config().vocab_size)
        prompts = seeded_prompts(spec.recipe.seed, args.prompts, args.prompt_len, vocab)
        reference.update(
            prompts=prompts, new_tokens=args.new_tokens, tokens=greedy_tokens(model, prompts, args.new_tokens)
        )
        chat = chat_reference(tokenizer, model, args.new_tokens)
        if chat is not None:
            reference["chat"] = chat
    elif spec.task_family == "sequence_classification":
        reference.update(texts=list(TEXTS), logits=logits(spec, model, list(TEXTS)))
    elif spec.task_family == "reranker":
        reference.update(
            query=QUERY, documents=list(TEXTS), logits=logits(spec, model, [QUERY] * len(TEXTS), list(TEXTS))
        )
    else:
        reference.update(texts=list(TEXTS), embeddings=embeddings(spec, model))
    write_text_atomic(Path(args.reference), json.dumps(reference) + "\n")
    return {
        "ok": True,
        "error": None,
        "weights": str(out),
        "mode": loaded.mode,
        "tokenizer": has_tokenizer,
        "parameters": reference["parameters"],
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default="adaptation.json")
    parser.add_argument("--out", required=True)
    parser.add_argument("--reference", required=True)
    parser.add_argument("--prompts", type=int, default=3)
    parser.add_argument("--prompt-len", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=8)
    parser.add_argument("--use-pretrained", action="store_true")
    args = parser.parse_args(argv)
    return run_main(lambda: export(args), bad_input=(UnsupportedModel,))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
