"""Finding a batch (`board_ops.py discover` / scripts/discover_models.py) through the real
huggingface_hub client against FakeHubServer's /api/models listing, the local HF cache and id
lists: the kept set, every drop reason, registration by rank on a real SQLite board."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ascendbridge.board import BoardStore
from ascendbridge.cli.board_ops import main as board_ops
from ascendbridge.config import REPO_ROOT

COMMIT = "c" * 40
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "float32"}
ALLOWED = ["--license", "apache-2.0,mit", "--license", "llama3"]


def _repo(
    root: Path,
    name: str,
    card: dict[str, Any],
    tensors: dict[str, tuple[str, list[int]]],
    safetensors_writer,
    model_writer,
    config: dict[str, Any] = LLAMA,
    files: dict[str, str] | None = None,
) -> Path:
    front = "\n".join(f"{k}: {json.dumps(v)}" for k, v in card.items())
    directory = model_writer(root / name, config, {"README.md": f"---\n{front}\n---\n# {name}\n", **(files or {})})
    if tensors:
        safetensors_writer(directory / "model.safetensors", tensors)
    return directory


def _header_only(path: Path, dtype: str, shape: list[int]) -> None:
    """A safetensors header for a tensor far too large to write: the Hub counts it all the same."""
    raw = json.dumps({"w": {"dtype": dtype, "shape": shape, "data_offsets": [0, 0]}}).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)


@pytest.fixture()
def hub_batch(fake_hub, tmp_path: Path, safetensors_writer, model_writer, monkeypatch):
    """A listing with a base model, its GGUF / AWQ / MLX variants and a byte-identical fork,
    gated, remote-code, oversized and non-free models, an unrelated GPTQ and an embedding model."""
    monkeypatch.delenv("ASCENDBRIDGE_DEVICE_MEMORY_GB", raising=False)
    root = tmp_path / "repos"
    gen = {"pipeline_tag": "text-generation", "library_name": "transformers"}

    def add(repo_id: str, downloads: int, card: dict[str, Any], tensors, tags=(), gated=False, **kw: Any) -> Path:
        directory = _repo(root, repo_id.replace("/", "--"), card, tensors, safetensors_writer, model_writer, **kw)
        fake_hub.add(
            repo_id,
            directory,
            COMMIT,
            gated=gated,
            downloads=downloads,
            likes=downloads // 10,
            tags=[*tags, f"license:{card.get('license', 'unknown')}"],
            **gen,
        )
        return directory

    def quantized(repo_id: str, downloads: int, base_model: str, tensors: dict[str, Any], method: str) -> Path:
        """An Apache-licensed quantization of `base_model` by `method` (its Hub tag)."""
        return add(repo_id, downloads, {"license": "apache-2.0", "base_model": base_model}, tensors, tags=[method])

    base = add("org/base-7b", 1000, {"license": "apache-2.0"}, {"w": ("F32", [64, 64])})
    fork = shutil.copytree(base, root / "fork")
    fake_hub.add("fork/base-7b-copy", fork, COMMIT, downloads=100, tags=["license:apache-2.0"], **gen)
    add(
        "TheBloke/base-7b-GGUF",
        900,
        {"license": "apache-2.0"},
        {},
        tags=["gguf", "base_model:quantized:org/base-7b"],
        files={"base-7b.Q4_K_M.gguf": "GGUF"},
    )
    quantized("someone/base-7b-AWQ", 800, "org/base-7b", {"qweight": ("I8", [64, 16]), "scales": ("F16", [64])}, "awq")
    add("meta/gated-lm", 700, {"license": "llama3"}, {"g": ("F32", [32, 32])}, gated=True)
    add(
        "custom/remote-lm",
        600,
        {"license": "mit"},
        {"r": ("F32", [16, 16])},
        tags=["custom_code"],
        config={**LLAMA, "auto_map": {"AutoModelForCausalLM": "modeling_x.XForCausalLM"}},
        files={"modeling_x.py": "# custom code\n"},
    )
    huge = add("big/huge-lm", 500, {"license": "apache-2.0"}, {})
    _header_only(huge / "model.safetensors", "BF16", [200_000, 200_000])  # 40B params, 74.5 GiB
    add("misc/nc-lm", 400, {"license": "cc-by-nc-4.0"}, {"n": ("F32", [8, 8])})
    quantized("q/other-GPTQ", 300, "absent/other", {"q": ("I8", [32, 8]), "s": ("F16", [32])}, "gptq")
    add("mlx-community/base-7b-4bit", 50, {"license": "apache-2.0"}, {"m": ("F16", [64, 8])}, tags=["mlx"])
    embed = _repo(
        root,
        "embed",
        {"license": "apache-2.0"},
        {"e": ("F32", [8, 8])},
        safetensors_writer,
        model_writer,
        config={"architectures": ["BertModel"], "model_type": "bert"},
    )
    fake_hub.add("org/bert-embed", embed, COMMIT, downloads=5000, pipeline_tag="feature-extraction")
    return fake_hub


def _discover(capsys, *args: str) -> tuple[int, str, str]:
    code = board_ops(["discover", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _verdicts(out: str) -> dict[str, Any]:
    return {c["model_id"]: c["rule"] for c in json.loads(out)["candidates"]}


def test_listing_kept_set_and_every_drop_reason(hub_batch, capsys, monkeypatch) -> None:
    code, out, err = _discover(capsys, "--task", "text-generation", "--sort", "downloads", *ALLOWED, "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["kept"] == ["org/base-7b", "q/other-GPTQ"]
    assert _verdicts(out) == {
        "org/base-7b": None,
        "TheBloke/base-7b-GGUF": "variant_of_base",
        "someone/base-7b-AWQ": "variant_of_base",
        "meta/gated-lm": "gated_no_token",
        "custom/remote-lm": "remote_code_not_allowed",
        "big/huge-lm": "too_large",
        "misc/nc-lm": "license_not_allowed",
        "q/other-GPTQ": None,
        "fork/base-7b-copy": "same_weights",
        "mlx-community/base-7b-4bit": "variant_of_base",
    }  # org/bert-embed is no text-generation model: the Hub's listing left it out
    rows = {c["model_id"]: c for c in result["candidates"]}
    assert [rows[m]["rank"] for m in ("org/base-7b", "TheBloke/base-7b-GGUF", "mlx-community/base-7b-4bit")] == [
        1,
        2,
        10,
    ]
    assert rows["big/huge-lm"]["parameters"] == 40_000_000_000 and "74.5 GiB" in rows["big/huge-lm"]["detail"]
    assert rows["fork/base-7b-copy"]["duplicate_of"] == "org/base-7b"
    assert rows["mlx-community/base-7b-4bit"]["why"] == "MLX variant of org/base-7b"  # found by its name
    assert rows["org/base-7b"]["parameters"] == 64 * 64 and rows["org/base-7b"]["downloads"] == 1000
    assert hub_batch.full_downloads(".safetensors") == []  # counts and hashes come from the Hub's metadata
    assert result["board"]["dry_run"] is True

    monkeypatch.setenv("HF_TOKEN", "hf_secret_token")
    code, out, err = _discover(capsys, "--task", "text-generation", *ALLOWED, "--allow-remote-code", "--json")
    assert code == 0, err
    assert json.loads(out)["kept"] == ["org/base-7b", "meta/gated-lm", "custom/remote-lm", "q/other-GPTQ"]
    assert "hf_secret_token" not in out + err
    code, out, _ = _discover(
        capsys, "--task", "text-generation", *ALLOWED, "--no-gated", "--max-params", "2k", "--json"
    )
    verdicts = _verdicts(out)
    assert verdicts["meta/gated-lm"] == "gated_excluded" and verdicts["org/base-7b"] == "too_many_parameters"


def test_register_puts_exactly_the_kept_set_on_the_board(hub_batch, board_path: Path, capsys) -> None:
    BoardStore.init(board_path).close()
    args = ("--board", str(board_path), "--task", "text-generation", *ALLOWED)
    code, out, err = _discover(capsys, *args)
    assert code == 0, err
    assert all(len(line) <= 100 for line in out.splitlines()), out
    assert out.count(" kept ") == 2 and out.count(" dropped: ") == 8 and "2 kept, 8 dropped" in out
    assert all(model_id in out for model_id in hub_batch.repos if model_id != "org/bert-embed")
    assert "dry run: would register 2 (0 already on the board)" in out
    with BoardStore(board_path) as store:
        assert store.list_models() == []

    code, out, err = _discover(capsys, *args, "--register")
    assert code == 0, err
    assert "registered 2, 0 already on the board" in out
    with BoardStore(board_path) as store:
        models = {m.model_id: m for m in store.list_models()}
    assert sorted(models) == ["org/base-7b", "q/other-GPTQ"]
    assert models["org/base-7b"].priority > models["q/other-GPTQ"].priority  # rank 1 runs first
    assert models["org/base-7b"].source == "huggingface"

    code, out, err = _discover(capsys, *args, "--register", "--json")
    assert code == 0, err
    assert json.loads(out)["board"] == {
        "dry_run": False,
        "registered": [],
        "already_registered": ["org/base-7b", "q/other-GPTQ"],
    }
    with BoardStore(board_path) as store:
        assert len(store.list_models()) == 2


def test_id_list_drops_renamed_and_respelled_repos(hub_batch, tmp_path: Path, capsys) -> None:
    hub_batch.rename("old-org/base-7b", "org/base-7b")
    ids = tmp_path / "ids.json"
    ids.write_text(
        json.dumps(
            [
                "org/base-7b",
                {"id": "ORG/Base-7B"},
                "old-org/base-7b",
                "fork/base-7b-copy",
                "nobody/missing",
                "org/bert-embed",
            ]
        )
    )
    code, out, err = _discover(capsys, "--from", str(ids), "--json")
    assert code == 0, err
    rows = json.loads(out)["candidates"]
    assert [(c["model_id"], c["rule"]) for c in rows] == [
        ("org/base-7b", None),
        ("org/base-7b", "same_repository"),
        ("org/base-7b", "same_repository"),
        ("fork/base-7b-copy", "same_weights"),
        ("org/bert-embed", None),
        ("nobody/missing", "not_found"),
    ]
    assert rows[2]["why"] == "listed as old-org/base-7b: same repository as org/base-7b"
    code, out, _ = _discover(capsys, "--from", str(ids), "--task", "text-generation", "--sort", "downloads", "--json")
    verdicts = [(c["model_id"], c["rule"]) for c in json.loads(out)["candidates"]]
    assert verdicts[0] == ("org/bert-embed", "not_matching")  # most downloaded, but not the task asked


def test_offline_cache_and_text_list(
    tmp_path: Path, capsys, safetensors_writer, model_writer, hf_cache_builder, board_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cache, root = tmp_path / "cache", tmp_path / "src"
    card = {"license": "apache-2.0", "pipeline_tag": "text-generation"}
    base = _repo(root, "base", card, {"w": ("F32", [64, 64])}, safetensors_writer, model_writer)
    awq = _repo(
        root, "awq", {**card, "base_model": "org/base-7b"}, {"q": ("I8", [64, 16])}, safetensors_writer, model_writer
    )
    nc = _repo(
        root, "nc", {**card, "license": "cc-by-nc-4.0"}, {"n": ("F32", [4, 4])}, safetensors_writer, model_writer
    )
    for repo_id, source in (
        ("org/base-7b", base),
        ("fork/base-7b-copy", base),
        ("someone/base-7b-AWQ", awq),
        ("misc/nc-lm", nc),
    ):
        hf_cache_builder(cache, repo_id, source, COMMIT)
    BoardStore.init(board_path).close()
    code, out, err = _discover(
        capsys, "--cache", str(cache), "--task", "text-generation", *ALLOWED, "--register", "--json"
    )
    assert code == 0, err
    result = json.loads(out)
    # The cache has no ranking: ids in order, so the copy named fork/... comes first and stays.
    assert _verdicts(out) == {
        "fork/base-7b-copy": None,
        "misc/nc-lm": "license_not_allowed",
        "org/base-7b": "same_weights",
        "someone/base-7b-AWQ": "variant_of_base",
    }
    with BoardStore(board_path) as store:
        (model,) = store.list_models()
    assert (model.model_id, model.source, model.path) == ("fork/base-7b-copy", "hf-cache", str(cache))
    assert result["source"] == f"hf-cache: {cache}"

    listed = tmp_path / "ids.txt"  # a list ranks them: its order
    listed.write_text("# the batch\norg/base-7b\nsomeone/base-7b-AWQ\nfork/base-7b-copy\nabsent/model\n")
    code, out, err = _discover(capsys, "--cache", str(cache), "--from", str(listed), "--json")
    assert code == 0, err
    assert _verdicts(out) == {
        "org/base-7b": None,
        "someone/base-7b-AWQ": "variant_of_base",
        "fork/base-7b-copy": "same_weights",
        "absent/model": "not_in_cache",
    }
    code, _, err = _discover(capsys, "--cache", str(cache), "--sort", "likes")
    assert code == 2 and err.startswith("error: --sort needs the Hub") and err.count("\n") == 1


def test_unreachable_hub_is_one_line_exit_2(tmp_path: Path) -> None:
    """The script as a user runs it: no Hub at HF_ENDPOINT, one line in a few seconds, no board."""
    board = tmp_path / "board.db"
    proc = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "discover_models.py"), "--register"],
        capture_output=True,
        text=True,
        timeout=120,
        env={
            **os.environ,
            "HF_HUB_OFFLINE": "0",
            "HF_ENDPOINT": "http://127.0.0.1:9",
            "ASCENDBRIDGE_HUB_TIMEOUT": "3",
            "ASCENDBRIDGE_BOARD": str(board),
        },
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        "error: cannot reach the Hugging Face Hub at http://127.0.0.1:9 (ConnectError); "
        "use --cache or --from FILE offline\n"
    )
    assert proc.stdout == "" and not board.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--sort", "popular"),
            "error: unknown sort key 'popular' (expected one of: downloads, likes, trending, last_modified)\n",
        ),
        (("--limit", "0"), "error: limit 0 is out of range (1..10000)\n"),
        (("--limit", "ten"), "error: argument --limit: invalid int value: 'ten' (see: board_ops.py discover --help)\n"),
        (
            ("--max-params", "lots"),
            "error: argument --max-params: 'lots' is not a parameter count (e.g. 7B, 500M, "
            "1.5e9) (see: board_ops.py discover --help)\n",
        ),
        (
            ("--from", "/nonexistent/ids.txt"),
            "error: cannot read model list /nonexistent/ids.txt: No such file or directory\n",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2(args: tuple[str, ...], message: str, board_path: Path, capsys) -> None:
    try:
        code = board_ops(["discover", "--register", *args])
    except SystemExit as exc:  # argparse's own errors leave through the parser
        code = int(exc.code or 0)
    assert code == 2
    captured = capsys.readouterr()
    assert captured.err == message and captured.out == ""
    assert not board_path.exists()
