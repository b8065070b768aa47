"""The healer: runs an adaptation, classifies what failed with a catalogue of named rules, fixes
the spec (never the rendered files), re-renders and runs again within an attempt budget.

Layout: `failure` (what a failed run looks like), `rules/` (the catalogue, one small unit per
rule), `classifier` (first matching rule wins), `loop` (the healing loop), `escalation` (the hook
where an LLM agent can later be asked), `evidence` (what the gate re-checks), `stage`
(HEALING_STAGE for the team lead).
"""
