"""Tiny demo models WITH saved weights and a locally made tokenizer, and what transformers answers.

Run inside the torch test environment:

    python build_weighted_models.py DEMO_DIR OUT_DIR REQUEST_JSON

REQUEST_JSON: {"prompt": str, "new_tokens": int, "text": str}. Writes OUT_DIR/tiny-bert-classifier/
(BertForSequenceClassification, named labels, WordPiece tokenizer) and OUT_DIR/tiny-gpt2/
(GPT2LMHeadModel, word-level tokenizer), each from the demo_models/ config with seeded weights
saved by save_pretrained (GPT-2's vocabulary cut to its tokenizer's); the weights are drawn wide (initializer_range 1.0) so argmaxes are
decisive, not near-ties. Prints one JSON line with each model's path and the library's own
answer, computed here by transformers alone: the text-classification pipeline's label of `text`,
and the greedy continuation of `prompt` decoded by the tokenizer. Tests compare the package's
answers with these.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import torch
import transformers as T
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

# Words the tests and the runtime's fixed sentences use (ab_runtime.parity.SENTENCES, demo defaults).
CORPUS = ("A package must answer exactly like the model's own library. Ascend NPUs run PyTorch models "
          "through torch_npu. short The capital of France is Paris. This film was a delight from start "
          "to finish. A man is playing a guitar. Someone is playing a musical instrument. The stock "
          "market fell sharply today. It rained all day and the match was cancelled.")
LABELS = ("negative", "neutral", "positive")


def words() -> list[str]:
    return sorted(set(re.findall(r"\w+|[^\w\s]", CORPUS.lower())))


def bert_classifier(demo: Path, out: Path, text: str) -> dict:
    """WordPiece vocabulary: the corpus words plus every letter as a word start and a piece, so
    any lower-case text tokenizes without [UNK]."""
    out.mkdir(parents=True)
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words(), *letters, *(f"##{c}" for c in letters)]
    (out / "vocab.txt").write_text("\n".join(dict.fromkeys(vocab)) + "\n")
    T.BertTokenizerFast(vocab_file=str(out / "vocab.txt")).save_pretrained(out)
    config = T.BertConfig.from_pretrained(demo / "tiny-bert-classifier", initializer_range=1.0,
                                          id2label=dict(enumerate(LABELS)), label2id={n: i for i, n in enumerate(LABELS)})
    torch.manual_seed(0)
    T.BertForSequenceClassification(config).save_pretrained(out)
    label = T.pipeline("text-classification", model=str(out), device="cpu")(text)[0]["label"]
    return {"path": str(out), "label": label}


def gpt2(demo: Path, out: Path, prompt: str, new_tokens: int) -> dict:
    out.mkdir(parents=True)
    vocab = {w: i for i, w in enumerate(["<|endoftext|>", "[UNK]", *(w for w in words() if w != "[UNK]")])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = T.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", unk_token="[UNK]")
    tokenizer.save_pretrained(out)
    # the model's vocabulary is the tokenizer's, so every generated id decodes to a word
    config = T.GPT2Config.from_pretrained(demo / "tiny-gpt2", initializer_range=1.0, vocab_size=len(vocab))
    torch.manual_seed(0)
    model = T.GPT2LMHeadModel(config).eval()
    model.save_pretrained(out)
    encoded = tokenizer(prompt, return_tensors="pt")
    with torch.inference_mode():
        ids = model.generate(**encoded, max_new_tokens=new_tokens, do_sample=False,
                             pad_token_id=tokenizer.eos_token_id)[0, encoded["input_ids"].shape[1]:]
    return {"path": str(out), "continuation": tokenizer.decode(ids.tolist(), skip_special_tokens=True)}


def main() -> None:
    demo, out, request = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])
    print(json.dumps({"tiny-bert-classifier": bert_classifier(demo, out / "tiny-bert-classifier", request["text"]),
                      "tiny-gpt2": gpt2(demo, out / "tiny-gpt2", request["prompt"], request["new_tokens"])}))


if __name__ == "__main__":
    main()
