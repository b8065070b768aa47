"""The model side of operator coverage (docs/operators.md): recording the ATen operators a model
dispatches for its workload (`record.py`) and the operator acceptance contract a replacement must
pass (`standard.py`: the thresholds, standard library; `acceptance.py`)."""
