"""Gate plumbing shared by the stages: running framework scripts in a package's interpreter
(envs, inner/), evidence files and checker command lines, the shipped-code integrity check, the
metrics / trace / workload checks, and the aggregate report writer."""
