"""Which evaluation sets a model gets, and the per-model override on the board.

    uv run business_benchmark/scripts/dataset_mapping.py --family causal_lm [--pipeline-tag T] [--language L] [--sentence-transformers]
    uv run business_benchmark/scripts/dataset_mapping.py --model MODEL_ID            (from the board)
    uv run business_benchmark/scripts/dataset_mapping.py --model MODEL_ID --override ab-sts-en,ab-retrieval-en
    uv run business_benchmark/scripts/dataset_mapping.py --model MODEL_ID --override ""   (back to the default)

Exit 0; 2 on bad usage, an unknown set or model (one line on stderr).
"""

from __future__ import annotations

import json
import sys

from ascendbridge.board import BoardError, BoardStore
from ascendbridge.cli_errors import CliError, OneLineParser, run_guarded
from ascendbridge.config import board_path
from business_benchmark.datasets import DatasetError
from business_benchmark.mapping import evaluations_for


def main(argv: list[str]) -> int:
    return run_guarded(lambda: _run(argv))


def _run(argv: list[str]) -> int:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--family")
    what.add_argument("--model", help="a model on the board")
    parser.add_argument("--pipeline-tag")
    parser.add_argument("--language")
    parser.add_argument("--sentence-transformers", action="store_true")
    parser.add_argument("--override", help="comma-separated set names stored on the board for --model")
    parser.add_argument("--board", help="board file (default: ASCENDBRIDGE_BOARD or ./board.db)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        if args.family:
            evaluations = evaluations_for(args.family, args.pipeline_tag, args.language, args.sentence_transformers)
        else:
            with BoardStore(args.board or board_path()) as store:
                model = store.get_model(args.model)
                meta = dict(model.metadata)
                st = bool(meta.get("sentence_transformers"))
                if args.override is not None:
                    sets = [s.strip() for s in args.override.split(",") if s.strip()]
                    evaluations_for(model.task_family, meta.get("pipeline_tag"), None, st, sets or None)  # validates
                    if sets:
                        meta["business_sets"] = sets
                    else:
                        meta.pop("business_sets", None)
                    model = store.update_model_metadata(args.model, {}, meta, origin="cli")
                evaluations = evaluations_for(
                    model.task_family, meta.get("pipeline_tag"), None, st, model.metadata.get("business_sets")
                )
    except (DatasetError, BoardError) as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print(json.dumps([e.as_dict() for e in evaluations]))
    else:
        for e in evaluations:
            print(f"{e.set}:{e.task}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
