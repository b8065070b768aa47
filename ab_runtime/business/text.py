"""Text -> token ids for the business sets: the model's own tokenizer, or bytes when it has none.

The tokenizer is loaded the runtime's way (ab_runtime.preprocess.load_tokenizer, from where the
weights come from); a model without a tokenizer that encodes into its vocabulary (config-only
demo models) still gets agreement figures, on byte ids recorded as `byte-fallback`.
"""

from __future__ import annotations

from typing import Any

from ..errors import UnsupportedModel
from ..inputs import TEXT_POSITION_LIMITS, TEXT_SUBCONFIGS, find_attr
from ..preprocess import load_tokenizer as model_tokenizer

MAX_TOKENS = 128  # text is truncated to this many tokens (or the model's position limit)
PROBE = "The quick brown fox."


class ByteTokenizer:
    """Text -> byte ids shifted past the low special ids, for models that ship no tokenizer."""

    kind = "byte-fallback"

    def __init__(self, vocab_size: int) -> None:
        self.vocab = max(int(vocab_size), 8)
        self.mask_token_id = self.vocab - 1

    def encode(self, text: str) -> list[int]:
        return [3 + b % (self.vocab - 4) for b in text.encode("utf-8")]

    def decode(self, ids: list[int]) -> str:
        return " ".join(str(i) for i in ids)


class ModelTokenizer:
    """The model's own tokenizer."""

    kind = "model"

    def __init__(self, tok: Any) -> None:
        self.tok = tok
        self.mask_token_id = tok.mask_token_id

    def encode(self, text: str) -> list[int]:
        return list(self.tok(text, add_special_tokens=True)["input_ids"])

    def encode_pair(self, first: str, second: str) -> list[int]:
        encoded = self.tok(first, second, add_special_tokens=True, truncation=True, max_length=MAX_TOKENS)
        return list(encoded["input_ids"])

    def decode(self, ids: list[int]) -> str:
        text = str(self.tok.decode(ids, skip_special_tokens=True)).strip()
        return text or " ".join(str(i) for i in ids)  # only special tokens: compare the ids


Tokenizer = ByteTokenizer | ModelTokenizer


def load_tokenizer(spec: Any, config: Any) -> Tokenizer:
    """The model's tokenizer when it has one that encodes into the model's vocabulary, else bytes."""
    vocab = find_attr(config, ("vocab_size",), TEXT_SUBCONFIGS) or 256
    try:
        tok = ModelTokenizer(model_tokenizer(spec))
        probe = tok.encode(PROBE)
    except (UnsupportedModel, ValueError):  # no usable tokenizer files (config-only models), or one that cannot encode
        return ByteTokenizer(vocab)
    return tok if probe and max(probe) < vocab else ByteTokenizer(vocab)


def text_limit(config: Any) -> int:
    """Tokens kept of one text: MAX_TOKENS, or fewer when the model has fewer positions."""
    limit = find_attr(config, TEXT_POSITION_LIMITS, TEXT_SUBCONFIGS)
    return min(MAX_TOKENS, limit - 2) if isinstance(limit, int) and limit > 4 else MAX_TOKENS
