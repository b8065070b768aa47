"""The Regressions page and the stack column: re-validation events and stack ids from the board."""

from __future__ import annotations

from ascendbridge.board import NewEvent
from tests.dashboard.dash_support import Site

STACK = {"stack_id": "5tack0000001", "data": {"python": "3.11.7", "torch": "2.13.0+cpu", "transformers": "5.24.0"}}


def test_regressions_page_lists_latest_verdicts_and_stacks(site: Site) -> None:
    with site.store() as store:
        task = next(t for t in store.list_tasks(model_id="acme/llama-tiny") if t.status == "pending")
        claimed = store.claim_task(task.id, "test", 60)
        store.complete_task(
            task.id,
            claimed.fencing_token,
            {},
            figures=[{"values": {"median_ms": 12.5}, "device": "cpu", "dtype": "float32", "stack": STACK}],
        )
        for verdict, summary in (
            ("unchanged", "within 5% (largest change 1.0%)"),
            ("regressed", "float32 median_ms +42.0% worse (10 -> 14.2) <b>x</b>"),
        ):
            data = {
                "model_id": "acme/llama-tiny",
                "adaptation": "acme__llama-tiny",
                "verdict": verdict,
                "summary": summary,
                "worst_worse_by": 0.42 if verdict == "regressed" else 0.01,
                "baseline_stack": "0ld000000000",
                "current_stack": STACK["stack_id"],
                "stack_detail": STACK["data"],
                "changes": [],
            }
            store.add_event(
                NewEvent("revalidation", f"{verdict}: {summary}", "acme/llama-tiny", "benchmark", data, "revalidation")
            )
    with site.client() as client:
        page = client.get("/regressions")
        model = client.get("/models/acme/llama-tiny")
    assert page.status_code == 200
    table = page.text[page.text.index('id="regressions"') :]
    assert table.count("<tr class=") == 1 and "verdict-regressed" in table  # the latest verdict only
    assert "+42.0%" in table and "&lt;b&gt;x&lt;/b&gt;" in table and "<b>x</b>" not in table
    assert "torch 2.13.0+cpu" in page.text and "5tack0000001" in table
    assert model.status_code == 200 and "5tack0000001" in model.text
