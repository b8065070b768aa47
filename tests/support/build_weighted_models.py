"""Tiny demo models WITH saved weights and a locally made tokenizer, and what transformers answers.

Run inside the torch test environment:

    python build_weighted_models.py DEMO_DIR OUT_DIR REQUEST_JSON

REQUEST_JSON: {"prompt": str, "new_tokens": int, "text": str, "labels": [str], "vlm_prompt": str}.
Writes OUT_DIR/tiny-bert-classifier/ (BertForSequenceClassification, named labels, WordPiece
tokenizer) and OUT_DIR/tiny-gpt2/ (GPT2LMHeadModel, word-level tokenizer), each from the
demo_models/ config, plus OUT_DIR/tiny-clip/ (CLIPModel) and OUT_DIR/tiny-qwen-vl/
(Qwen2.5-VL, a chat template) from tests/runtime/tiny_models.py's configs with their image
processors, and OUT_DIR/gradient.png; all with seeded weights saved by save_pretrained (GPT-2's
vocabulary cut to its tokenizer's), drawn wide (initializer_range 1.0) so argmaxes are decisive,
not near-ties. Prints one JSON line with each model's path and the library's own answer,
computed here by transformers alone: the text-classification pipeline's label of `text`, the
greedy continuation of `prompt`, the zero-shot-image-classification pipeline's best of `labels`
on the PNG, and the VLM's greedy continuation of the chat-formatted PNG + `vlm_prompt`. Tests
compare the package's answers with these.
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
CORPUS = (
    "A package must answer exactly like the model's own library. Ascend NPUs run PyTorch models "
    "through torch_npu. short The capital of France is Paris. This film was a delight from start "
    "to finish. A man is playing a guitar. Someone is playing a musical instrument. The stock "
    "market fell sharply today. It rained all day and the match was cancelled."
)
LABELS = ("negative", "neutral", "positive")
VISION_WORDS = ("a", "cat", "dog", "car", "describe", "this", "image", "user", "assistant")  # labels, prompts, roles
# Qwen2.5-VL's special tokens at the ids tiny_models.py's config names, then its chat markers
VLM_SPECIAL = (
    "<|image_pad|>",
    "<|video_pad|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "[UNK]",
)
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def words() -> list[str]:
    return sorted(set(re.findall(r"\w+|[^\w\s]", CORPUS.lower())) | set(VISION_WORDS))


def word_tokenizer(vocab: dict[str, int], **special: str) -> T.PreTrainedTokenizerFast:
    """A lower-casing word-level tokenizer over `vocab` (whitespace and punctuation split)."""
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return T.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", **special)


def tiny_config(name: str) -> T.PretrainedConfig:
    """A config of tests/runtime/tiny_models.py's catalogue (one definition of each tiny model)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))
    from tiny_models import CONFIGS

    return CONFIGS[name]()


def test_image(out: Path) -> Path:
    """A 48 x 40 RGB gradient PNG (PIL), the image the vision answers are computed on."""
    from PIL import Image

    path = out / "gradient.png"
    image = Image.new("RGB", (48, 40))
    image.putdata([(x * 5 % 256, y * 6 % 256, (x + y) * 3 % 256) for y in range(40) for x in range(48)])
    image.save(path)
    return path


def clip(out: Path, image: Path, labels: list[str]) -> dict:
    """CLIPModel with seeded weights, a word-level tokenizer and CLIP's image processor; the
    zero-shot-image-classification pipeline's best label and score on `image`."""
    from PIL import Image

    out.mkdir(parents=True)
    vocab = {w: i for i, w in enumerate(["<|startoftext|>", "<pad>", "<|endoftext|>", "[UNK]", *words()])}
    word_tokenizer(vocab, bos_token="<|startoftext|>", eos_token="<|endoftext|>", pad_token="<pad>").save_pretrained(
        out
    )
    T.CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}).save_pretrained(out)
    torch.manual_seed(0)
    config = tiny_config("clip-zero-shot")
    config.initializer_factor = 5.0  # decisive probabilities, not a near-uniform split
    T.CLIPModel(config).save_pretrained(out)
    best = T.pipeline("zero-shot-image-classification", model=str(out), device="cpu")(
        Image.open(image), candidate_labels=labels, hypothesis_template="{}"
    )[0]
    return {"path": str(out), "label": best["label"], "score": best["score"]}


def qwen_vl(out: Path, image: Path, prompt: str, new_tokens: int) -> dict:
    """Qwen2.5-VL with seeded weights, a word-level tokenizer with a chat template and Qwen2-VL's
    image processor; the greedy continuation of the chat-formatted image + `prompt`, its input
    built as Qwen2_5_VLProcessor builds it (one <|image_pad|> per merged patch)."""
    from PIL import Image

    out.mkdir(parents=True)
    config = tiny_config("qwen2.5-vl")
    vocab = {w: i for i, w in enumerate(words()[: config.image_token_id])}
    vocab.update({t: config.image_token_id + i for i, t in enumerate(VLM_SPECIAL)})
    tokenizer = word_tokenizer(vocab, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tokenizer.add_special_tokens({"additional_special_tokens": list(VLM_SPECIAL[:6])})
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(out)
    vision = config.vision_config
    side = 4 * vision.patch_size * vision.spatial_merge_size
    processor = T.Qwen2VLImageProcessor(
        patch_size=vision.patch_size,
        merge_size=vision.spatial_merge_size,
        temporal_patch_size=vision.temporal_patch_size,
        min_pixels=side * side,
        max_pixels=side * side,
    )
    processor.save_pretrained(out)
    torch.manual_seed(0)
    config.text_config.initializer_range = 1.0
    model = T.Qwen2_5_VLForConditionalGeneration(config).eval()
    model.save_pretrained(out)
    pixels = T.AutoImageProcessor.from_pretrained(out)(images=Image.open(image).convert("RGB"), return_tensors="pt")
    count = int(pixels["image_grid_thw"][0].prod()) // vision.spatial_merge_size**2
    content = "<|vision_start|>" + "<|image_pad|>" * count + "<|vision_end|>" + prompt
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False
    )
    encoded = tokenizer(text, return_tensors="pt")
    inputs = {
        **encoded,
        "mm_token_type_ids": (encoded["input_ids"] == config.image_token_id).long(),
        "pixel_values": pixels["pixel_values"],
        "image_grid_thw": pixels["image_grid_thw"],
    }
    with torch.inference_mode():
        ids = model.generate(**inputs, max_new_tokens=new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id)[
            0, encoded["input_ids"].shape[1] :
        ]
    return {"path": str(out), "continuation": tokenizer.decode(ids.tolist(), skip_special_tokens=True)}


def bert_classifier(demo: Path, out: Path, text: str) -> dict:
    """WordPiece vocabulary: the corpus words plus every letter as a word start and a piece, so
    any lower-case text tokenizes without [UNK]."""
    out.mkdir(parents=True)
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words(), *letters, *(f"##{c}" for c in letters)]
    (out / "vocab.txt").write_text("\n".join(dict.fromkeys(vocab)) + "\n")
    T.BertTokenizerFast(vocab_file=str(out / "vocab.txt")).save_pretrained(out)
    config = T.BertConfig.from_pretrained(
        demo / "tiny-bert-classifier",
        initializer_range=1.0,
        id2label=dict(enumerate(LABELS)),
        label2id={n: i for i, n in enumerate(LABELS)},
    )
    torch.manual_seed(0)
    T.BertForSequenceClassification(config).save_pretrained(out)
    label = T.pipeline("text-classification", model=str(out), device="cpu")(text)[0]["label"]
    return {"path": str(out), "label": label}


def gpt2(demo: Path, out: Path, prompt: str, new_tokens: int) -> dict:
    out.mkdir(parents=True)
    vocab = {w: i for i, w in enumerate(["<|endoftext|>", "[UNK]", *(w for w in words() if w != "[UNK]")])}
    tokenizer = word_tokenizer(vocab, eos_token="<|endoftext|>")
    tokenizer.save_pretrained(out)
    # the model's vocabulary is the tokenizer's, so every generated id decodes to a word
    config = T.GPT2Config.from_pretrained(demo / "tiny-gpt2", initializer_range=1.0, vocab_size=len(vocab))
    torch.manual_seed(0)
    model = T.GPT2LMHeadModel(config).eval()
    model.save_pretrained(out)
    encoded = tokenizer(prompt, return_tensors="pt")
    with torch.inference_mode():
        ids = model.generate(
            **encoded, max_new_tokens=new_tokens, do_sample=False, pad_token_id=tokenizer.eos_token_id
        )[0, encoded["input_ids"].shape[1] :]
    return {"path": str(out), "continuation": tokenizer.decode(ids.tolist(), skip_special_tokens=True)}


def main() -> None:
    demo, out, request = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])
    image = test_image(out)
    print(
        json.dumps(
            {
                "tiny-bert-classifier": bert_classifier(demo, out / "tiny-bert-classifier", request["text"]),
                "tiny-gpt2": gpt2(demo, out / "tiny-gpt2", request["prompt"], request["new_tokens"]),
                "tiny-clip": clip(out / "tiny-clip", image, request["labels"]),
                "tiny-qwen-vl": qwen_vl(out / "tiny-qwen-vl", image, request["vlm_prompt"], request["new_tokens"]),
                "image": {"path": str(image)},
            }
        )
    )


if __name__ == "__main__":
    main()
