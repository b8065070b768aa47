"""Regenerate the bundled evaluation sets and their data cards (deterministic, no network).

    uv run business_benchmark/scripts/make_bundled_sets.py

Every set is written for this repository from the hand-written material below (Apache-2.0, like
the code), as JSON lines in business_benchmark/data/<name>.jsonl, with a data card
<name>.card.json that records what it is, its licence, its size, how it was made and the file's
sha256 digest. The gate refuses a set whose file no longer matches its card.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ascendbridge.cli_errors import OneLineParser, run_guarded
from business_benchmark.datasets import DATA_DIR, sha256_file

LICENCE = "Apache-2.0 (written for this repository)"
HOW_MADE = (
    "Hand-written sentences in business_benchmark/scripts/make_bundled_sets.py, combined "
    "deterministically by that script (no model, no scraping, no third-party data)."
)

# (topic document, query that only this document answers, a paraphrase of the document)
TOPICS: list[tuple[str, str, str]] = [
    (
        "Bread rises because yeast ferments the sugars in the dough and releases carbon dioxide.",
        "why does bread dough rise",
        "Yeast eats sugar in dough and the gas it gives off makes bread rise.",
    ),
    (
        "The Pacific is the largest and deepest of the world's oceans.",
        "which ocean is the biggest",
        "No ocean on Earth is larger or deeper than the Pacific.",
    ),
    (
        "A bicycle chain should be cleaned and oiled every few hundred kilometres.",
        "how often should I oil my bike chain",
        "Clean and lubricate a bike chain every couple of hundred kilometres.",
    ),
    (
        "Photosynthesis lets plants turn sunlight, water and carbon dioxide into sugar and oxygen.",
        "how do plants make food from light",
        "Plants use light, water and CO2 to produce sugar and oxygen.",
    ),
    (
        "A fever is a body temperature above about 38 degrees Celsius.",
        "what temperature counts as a fever",
        "Doctors call a temperature over roughly 38 C a fever.",
    ),
    (
        "Interest on a savings account is usually paid monthly or yearly by the bank.",
        "when does a bank pay savings interest",
        "Banks normally pay interest on savings every month or every year.",
    ),
    (
        "Honey bees communicate the location of flowers with a waggle dance.",
        "how do bees tell each other where flowers are",
        "Bees dance to show the hive where the flowers are.",
    ),
    (
        "Copper is used in electrical wires because it conducts electricity well and is cheap.",
        "why are electric wires made of copper",
        "Wires use copper since it is an inexpensive, good conductor.",
    ),
    (
        "The train to the airport leaves from platform four every fifteen minutes.",
        "where do I catch the airport train",
        "Airport trains depart from platform four four times an hour.",
    ),
    (
        "A password manager stores long random passwords so you do not have to remember them.",
        "what does a password manager do",
        "Password managers keep strong random passwords for you.",
    ),
    (
        "Mount Everest, on the border of Nepal and China, is the highest mountain above sea level.",
        "what is the tallest mountain in the world",
        "The highest peak on Earth is Everest, between Nepal and China.",
    ),
    (
        "Coffee contains caffeine, a stimulant that makes people feel more alert.",
        "why does coffee wake you up",
        "The caffeine in coffee is a stimulant that increases alertness.",
    ),
    (
        "Solar panels convert sunlight directly into electricity using semiconductor cells.",
        "how do solar panels produce power",
        "Semiconductor cells in solar panels turn light into electric current.",
    ),
    (
        "Whales are mammals: they breathe air and feed their young with milk.",
        "are whales fish or mammals",
        "Whales breathe air and nurse their calves, so they are mammals.",
    ),
    (
        "Invoices must be paid within thirty days of the delivery date.",
        "what is the payment deadline for an invoice",
        "Payment of an invoice is due thirty days after delivery.",
    ),
    (
        "The library lends books for three weeks and they can be renewed twice online.",
        "how long can I keep a library book",
        "Library books are lent for three weeks with two online renewals.",
    ),
    (
        "A leap year has 366 days, with the extra day added to February.",
        "how many days are in a leap year",
        "Leap years have an additional day in February, 366 in total.",
    ),
    (
        "Penguins live almost entirely in the Southern Hemisphere, many of them in Antarctica.",
        "where do penguins live",
        "Most penguins are found in the southern half of the globe, often in Antarctica.",
    ),
    (
        "Washing hands with soap for twenty seconds removes most germs.",
        "how long should you wash your hands",
        "Twenty seconds of washing with soap gets rid of most germs.",
    ),
    (
        "The museum is closed on Mondays and open until eight in the evening on Fridays.",
        "when is the museum open late",
        "On Fridays the museum stays open until 8 pm; it is shut on Mondays.",
    ),
    (
        "Rust forms when iron reacts with oxygen and water over time.",
        "what causes iron to rust",
        "Iron rusts because oxygen and moisture react with it.",
    ),
    (
        "A refund is issued to the original card within five working days of the return.",
        "how long does a refund take",
        "Returned items are refunded to your card within five business days.",
    ),
    (
        "The Nile flows north through eleven countries into the Mediterranean Sea.",
        "which direction does the Nile flow",
        "The Nile runs northwards across eleven countries to the Mediterranean.",
    ),
    (
        "Regular exercise strengthens the heart and lowers blood pressure.",
        "what are the benefits of exercise for the heart",
        "Working out often makes the heart stronger and reduces blood pressure.",
    ),
    (
        "Snow tyres have deeper treads and softer rubber that grip better in the cold.",
        "why use winter tyres",
        "Winter tyres grip cold roads better thanks to soft rubber and deep treads.",
    ),
    (
        "The printer on the second floor needs a badge to release print jobs.",
        "how do I release a print job",
        "Use your badge at the second-floor printer to release what you printed.",
    ),
    (
        "Volcanoes erupt when pressure from molten rock beneath the surface becomes too great.",
        "why do volcanoes erupt",
        "Eruptions happen when magma pressure under the ground grows too high.",
    ),
    (
        "Tomatoes grow best in full sun with regular watering at the roots.",
        "how should I grow tomatoes",
        "Give tomato plants plenty of sun and water them steadily at the base.",
    ),
    (
        "The warranty covers manufacturing defects for two years but not accidental damage.",
        "does the warranty cover accidents",
        "Defects are covered for two years; accidental damage is not.",
    ),
    (
        "Light travels at about 300,000 kilometres per second in a vacuum.",
        "how fast is the speed of light",
        "In empty space light moves at roughly three hundred thousand km per second.",
    ),
]

POSITIVE = ["wonderful", "excellent", "delightful", "fantastic", "great", "superb"]
NEGATIVE = ["terrible", "awful", "disappointing", "dreadful", "poor", "horrible"]
ITEMS = [
    "the service",
    "the food",
    "this phone",
    "the hotel room",
    "the film",
    "the delivery",
    "the support team",
    "this laptop",
    "the concert",
    "the app",
]
PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village,",
    "The best way to learn a language is",
    "In the morning I usually",
    "The weather today is",
    "My favourite book is about",
    "To make a cup of tea, first",
    "The meeting was moved to",
    "Scientists have discovered that",
    "The train was late because",
    "Our company sells",
    "The recipe calls for",
    "At the end of the day,",
    "The most important rule is",
    "She opened the door and",
    "The report shows that sales",
    "Water boils at",
    "The city is famous for",
    "He forgot his keys, so",
    "The new software update",
]
QA: list[tuple[int, str, str]] = [  # (topic index, question, answer span inside the topic document)
    (0, "What does yeast release?", "carbon dioxide"),
    (1, "Which is the largest ocean?", "The Pacific"),
    (4, "Above what temperature is it a fever?", "about 38 degrees Celsius"),
    (6, "How do honey bees communicate flower locations?", "with a waggle dance"),
    (8, "Which platform does the airport train leave from?", "platform four"),
    (10, "What is the highest mountain above sea level?", "Mount Everest"),
    (11, "Which stimulant does coffee contain?", "caffeine"),
    (14, "Within how many days must invoices be paid?", "thirty days"),
    (15, "For how long does the library lend books?", "three weeks"),
    (16, "How many days does a leap year have?", "366"),
    (19, "On which day is the museum closed?", "Mondays"),
    (21, "Within how many working days is a refund issued?", "five working days"),
    (22, "Into which sea does the Nile flow?", "the Mediterranean Sea"),
    (25, "What is needed to release print jobs?", "a badge"),
    (28, "For how long does the warranty cover defects?", "two years"),
    (29, "How fast does light travel in a vacuum?", "about 300,000 kilometres per second"),
]


def perplexity_text() -> list[dict[str, Any]]:
    return [{"id": f"t{i:03d}", "text": f"{doc} {para}"} for i, (doc, _, para) in enumerate(TOPICS)]


def generation_prompts() -> list[dict[str, Any]]:
    return [{"id": f"p{i:03d}", "prompt": p} for i, p in enumerate(PROMPTS)]


def retrieval() -> list[dict[str, Any]]:
    docs = [{"id": f"d{i:03d}", "kind": "document", "text": doc} for i, (doc, _, _) in enumerate(TOPICS)]
    queries = [
        {"id": f"q{i:03d}", "kind": "query", "text": q, "relevant": f"d{i:03d}"} for i, (_, q, _) in enumerate(TOPICS)
    ]
    return docs + queries


def similarity() -> list[dict[str, Any]]:
    """Graded pairs: paraphrase 4.5, query vs its document 3.5, the next topic's document 0.5."""
    items = []
    n = len(TOPICS)
    for i, (doc, query, para) in enumerate(TOPICS):
        other = TOPICS[(i + 7) % n][0]
        items += [
            {"id": f"s{i:03d}a", "sentence1": doc, "sentence2": para, "score": 4.5},
            {"id": f"s{i:03d}b", "sentence1": query, "sentence2": doc, "score": 3.5},
            {"id": f"s{i:03d}c", "sentence1": doc, "sentence2": other, "score": 0.5},
        ]
    return items


def labelled() -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for i, item in enumerate(ITEMS):
        for j in range(3):
            items.append(
                {
                    "id": f"l{len(items):03d}",
                    "text": f"I thought {item} was {POSITIVE[(i + j) % 6]}.",
                    "label": "positive",
                }
            )
            items.append(
                {
                    "id": f"l{len(items):03d}",
                    "text": f"Honestly, {item} was {NEGATIVE[(i + j) % 6]}.",
                    "label": "negative",
                }
            )
    return items


def question_answering() -> list[dict[str, Any]]:
    out = []
    for k, (topic, question, answer) in enumerate(QA):
        context = TOPICS[topic][0]
        start = context.index(answer)
        out.append(
            {"id": f"qa{k:03d}", "question": question, "context": context, "answer": answer, "answer_start": start}
        )
    return out


def seq2seq_sources() -> list[dict[str, Any]]:
    return [{"id": f"x{i:03d}", "source": f"summarize: {doc} {para}"} for i, (doc, _, para) in enumerate(TOPICS)]


def multiple_choice() -> list[dict[str, Any]]:
    """Each QA question with its answer and three other questions' answers as choices."""
    out = []
    answers = [answer for _, _, answer in QA]
    for k, (_, question, _answer) in enumerate(QA):
        choices = [answers[(k + shift) % len(answers)] for shift in (0, 3, 7, 11)]
        correct = k % 4
        choices[0], choices[correct] = choices[correct], choices[0]
        out.append({"id": f"mc{k:03d}", "question": question, "choices": choices, "answer": correct})
    return out


SETS: dict[str, tuple[str, str, Any]] = {
    "ab-text-en": (
        "perplexity",
        "English sentences for perplexity (a topic sentence and its paraphrase).",
        perplexity_text,
    ),
    "ab-prompts-en": (
        "generation",
        "English prompts for greedy generation (no gold continuation).",
        generation_prompts,
    ),
    "ab-retrieval-en": ("retrieval", "Queries with exactly one relevant document among 30 topic documents.", retrieval),
    "ab-sts-en": (
        "similarity",
        "Sentence pairs with graded similarity scores 0-5 (paraphrase, query/document, unrelated).",
        similarity,
    ),
    "ab-sentiment-en": ("classification", "Short review sentences labelled positive or negative.", labelled),
    "ab-qa-en": (
        "question_answering",
        "Question / context / answer-span triples (SQuAD-style, one span).",
        question_answering,
    ),
    "ab-seq2seq-en": (
        "seq2seq",
        "Source texts for a text-to-text model (no gold targets: compared with the reference's outputs).",
        seq2seq_sources,
    ),
    "ab-choice-en": (
        "lm_eval",
        "Four-way multiple-choice questions for the local lm-evaluation-harness task (ab_choice_en).",
        multiple_choice,
    ),
}


def write_set(name: str, kind: str, description: str, items: list[dict[str, Any]], out: Path) -> None:
    path = out / f"{name}.jsonl"
    path.write_text("".join(json.dumps(item, sort_keys=True) + "\n" for item in items))
    card = {
        "name": name,
        "kind": kind,
        "description": description,
        "language": "en",
        "licence": LICENCE,
        "items": len(items),
        "file": path.name,
        "how_made": HOW_MADE,
        "sha256": sha256_file(path),
        "fields": sorted({k for item in items for k in item}),
    }
    (out / f"{name}.card.json").write_text(json.dumps(card, indent=2, sort_keys=True) + "\n")


def main(argv: list[str]) -> int:
    return run_guarded(lambda: _run(argv))


def _run(argv: list[str]) -> int:
    OneLineParser(description=__doc__.splitlines()[0]).parse_args(argv)  # no options: --help, or a one-line error
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    for name, (kind, description, make) in SETS.items():
        write_set(name, kind, description, make(), DATA_DIR)
        print(f"{name}: written")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
