"""The data a Trainer trains and evaluates on: the corpus tokenized (the model's own tokenizer, else
bytes) and packed into blocks of seq_len, split into train and held-out, with the ids the
objectives need and a digest a resume checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import corpus
from .paradigm import Paradigm

if TYPE_CHECKING:
    from .config import TrainConfig


def tokenizer_for(config_dir: Path, vocab_size: int) -> Any:
    """The model's own tokenizer when its directory has one, else the byte tokenizer."""
    if (config_dir / "tokenizer.json").exists() or (config_dir / "tokenizer_config.json").exists():
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(config_dir)
    return corpus.ByteTokenizer(vocab_size)


def encode(tokenizer: Any, text: str) -> list[int]:
    if isinstance(tokenizer, corpus.ByteTokenizer):
        return tokenizer.encode(text)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


@dataclass
class Data:
    """Packed blocks of the train and held-out splits and the ids the objectives need."""

    train: list[Any]
    held_out: list[Any]
    pad_id: int
    eos_id: int
    mask_id: int
    special: tuple[int, ...]
    digest: str


def prepare_data(cfg: TrainConfig, paradigm: Paradigm, model_config: Any) -> Data:
    tok = tokenizer_for(Path(cfg.model_dir), int(model_config.vocab_size))
    if isinstance(tok, corpus.ByteTokenizer):
        pad, eos, mask = tok.pad_id, tok.eos_id, tok.mask_id
    else:
        pad = tok.pad_token_id if tok.pad_token_id is not None else 0
        eos = tok.eos_token_id if tok.eos_token_id is not None else (tok.sep_token_id or pad)
        mask = tok.mask_token_id if tok.mask_token_id is not None else pad
    train_docs, held_docs = corpus.split(corpus.load_documents(Path(cfg.corpus)))

    def blocks(docs: list[corpus.Document]) -> list[Any]:
        if paradigm.name != "seq2seq":
            if any(doc.target is not None for doc in docs):
                raise corpus.CorpusError(
                    f"{cfg.corpus}: source/target records train a seq2seq model, not a {paradigm.name}"
                )
            return corpus.pack((encode(tok, doc.text) for doc in docs), cfg.seq_len, eos)
        if any(doc.target is None for doc in docs):
            raise corpus.CorpusError(
                f"{cfg.corpus}: seq2seq training needs source/target records (the target is the labels)"
            )

        def fit(ids: list[int]) -> list[int]:
            ids = (ids + [eos])[: cfg.seq_len]
            return ids + [pad] * (cfg.seq_len - len(ids))

        return [(fit(encode(tok, doc.text)), fit(encode(tok, doc.target or ""))) for doc in docs]

    train, held = blocks(train_docs), blocks(held_docs)
    return Data(
        train,
        held,
        pad,
        eos,
        mask,
        tuple({pad, eos, mask}),
        corpus.digest_blocks([list(b) if paradigm.name != "seq2seq" else b[0] + b[1] for b in train]),
    )
