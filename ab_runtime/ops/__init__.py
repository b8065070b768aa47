"""The model side of operator coverage (docs/operators.md): recording the ATen operators a model
dispatches for its workload (`record.py`) and the operator acceptance contract every replacement
passes before it is used (`standard.py`: the thresholds, standard library; `acceptance.py`)."""
