"""The business benchmark's model side: task predictions of the reference and the target on real sets.

run (behind every adaptation's business_run.py, a thin generated wrapper) reads the sets and
writes the predictions; tasks holds one prediction function per task; pair runs the reference
and the target through the harness's builds, clock and greedy decoder; text encodes the sets'
text; lm_eval_run drives lm-eval. The metrics, the pass rule and the gate live in the framework.
"""
