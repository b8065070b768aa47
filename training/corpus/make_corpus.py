"""Regenerate the bundled training corpus (deterministic): `python training/corpus/make_corpus.py`.

Short documents written from a small grammar (animals, places, counting, days of the week): a
byte-level model learns its spelling and word order within a few dozen steps, which is what a
demo and a test of "the loss goes down" need. No external text is used.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

ANIMALS = ["cat", "dog", "fox", "owl", "hen", "cow", "bee", "ant"]
PLACES = ["garden", "kitchen", "forest", "river", "barn", "meadow", "hill", "village"]
ACTIONS = ["sat in the", "walked to the", "slept near the", "looked at the", "ran across the"]
COLOURS = ["red", "blue", "green", "yellow", "brown", "white"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
NUMBERS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
DOCUMENTS = 400


def story(rng: random.Random) -> str:
    animal, place = rng.choice(ANIMALS), rng.choice(PLACES)
    day = rng.randrange(len(DAYS))
    count = rng.randrange(len(NUMBERS) - 3)
    sentences = [
        f"On {DAYS[day]} the {rng.choice(COLOURS)} {animal} {rng.choice(ACTIONS)} {place}.",
        f"The next day was {DAYS[(day + 1) % 7]}.",
        f"The {animal} counted {', '.join(NUMBERS[count : count + 3])}.",
        f"Then the {animal} went home from the {place}.",
    ]
    return " ".join(sentences)


def main() -> None:
    rng = random.Random(28)
    here = Path(__file__).resolve().parent
    lines = [json.dumps({"text": story(rng)}) for _ in range(DOCUMENTS)]
    (here / "tiny_stories.jsonl").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
