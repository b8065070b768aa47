"""Host acceptance, the framework side: the shipped table of what each device should deliver
(`expectations.toml`, read by `expectations.py`) and the judgement of a measurement against it
(`judge.py`). The measurement itself runs in a package's interpreter: ab_runtime/host_acceptance.py."""
