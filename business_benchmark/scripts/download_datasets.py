"""Fetch Hub evaluation sets into the Hugging Face cache, and list what is cached.

    uv run business_benchmark/scripts/download_datasets.py --list
    uv run business_benchmark/scripts/download_datasets.py --family feature_extraction [--language en]
    uv run business_benchmark/scripts/download_datasets.py --dataset mteb/stsbenchmark-sts [--config C] [--split test]

With the `datasets` library installed (`uv sync --extra datasets`) a set is loaded through
`datasets.load_dataset` (so it is ready for offline use); otherwise its files are fetched with
huggingface_hub's `snapshot_download`. Both honour HF_ENDPOINT, HF_TOKEN, HF_HOME and the offline
switches (HF_HUB_OFFLINE, HF_DATASETS_OFFLINE). The bundled sets need none of this. Exit 0 done;
2 bad usage or the Hub unreachable (one line on stderr).
"""

from __future__ import annotations

import importlib.util
import os
import sys

from ascendbridge.cli_errors import CliError, OneLineParser, run_guarded
from business_benchmark.datasets import list_sets, load_card
from business_benchmark.mapping import HUB_SETS


def list_cached() -> int:
    print("bundled sets (offline, digest-checked against their data cards):")
    for name in list_sets():
        card = load_card(name)
        print(f"  {name:18s} {card.kind:22s} {card.items:4d} items  {(card.sha256 or 'generated')[:12]}")
    from huggingface_hub import constants, scan_cache_dir

    try:
        cached = [r for r in scan_cache_dir().repos if r.repo_type == "dataset"]
    except Exception:  # no cache directory yet
        cached = []
    if not cached:
        print(f"no Hub sets cached in {constants.HF_HUB_CACHE}")
    for repo in sorted(cached, key=lambda r: r.repo_id):
        print(f"  hub: {repo.repo_id:40s} {repo.size_on_disk / 1e6:9.1f} MB")
    return 0


def fetch(repo: str, config: str | None, split: str | None) -> None:
    if importlib.util.find_spec("datasets") is not None:
        import datasets
        from huggingface_hub.utils import logging as hub_logging

        hub_logging.set_verbosity_error()  # its retry warnings would break the one-line error of an unreachable Hub
        data = datasets.load_dataset(repo, config, split=split)
        print(
            f"{repo}{'/' + config if config else ''} {split or ''}: {len(data) if hasattr(data, '__len__') else '?'} rows cached"
        )
        return
    from huggingface_hub import snapshot_download

    path = snapshot_download(repo_id=repo, repo_type="dataset")
    print(f"{repo}: files cached at {path} (install the datasets extra to load it)")


def main(argv: list[str]) -> int:
    return run_guarded(lambda: _run(argv))


def _run(argv: list[str]) -> int:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--list", action="store_true", help="bundled sets and Hub sets in the cache")
    what.add_argument("--family", help="fetch the Hub sets mapped to this task family")
    what.add_argument("--dataset", help="fetch one Hub dataset repo")
    parser.add_argument("--language", default="en")
    parser.add_argument("--config")
    parser.add_argument("--split")
    args = parser.parse_args(argv)
    if args.list:
        return list_cached()
    sets: tuple[tuple[str, str | None, str | None], ...] | None
    if args.family:
        sets = HUB_SETS.get((args.family, args.language))
        if not sets:
            raise CliError(f"no Hub sets mapped for family {args.family} in language {args.language}")
    else:
        sets = ((args.dataset, args.config, args.split or None),)
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    for repo, config, split in sets:
        try:
            fetch(repo, config, split)
        except Exception as exc:  # connection refused, 401/404, offline mode without a cache
            first = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
            raise CliError(f"cannot fetch {repo} from {endpoint}: {type(exc).__name__}: {first}") from None
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
