"""The training stage's model side: one harness for continued pretraining and fine-tuning.

corpus reads and packs the training text; paradigm turns a model config into its training
objective (causal LM, masked LM, seq2seq; others refused with the reason); lora adds low-rank
adapters; harness runs the steps (precision policy, DDP / FSDP2 under torchrun, checkpoints with
every RNG state, guards); contract is the framework's baseline-contract table and verdict
(standard library only: the gate imports the same file); run is the command line behind a
package's train.py.
"""
