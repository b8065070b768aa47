"""Re-runs that redo only what changed: each completed stage records what it read (its inputs'
fingerprint) and the package its gate passed (a manifest); the main job's next pass reuses a stage
whose inputs and evidence are unchanged and re-runs a model from its first stage that changed
(docs/main_job.md, "Running it again")."""
