"""The choices a workload offers, in the order front ends list them (CLI ``choices=``, the builder's
selects, :class:`~fleet_tui.core.workload.Workload`'s field types). No imports: the CLI builds its
parser from these without loading pydantic, so ``--help`` stays fast."""

KINDS = ("inference", "training", "finetune", "lora", "qlora")
PRECISIONS = ("fp32", "fp16", "bf16", "fp8", "int8", "int4")
OPTIMIZERS = ("adamw", "adamw8bit", "sgd", "adafactor")
SHARDINGS = ("data", "tensor", "fsdp")
MASTER_WEIGHTS = ("fp32", "none")
SERVING_MODES = ("interactive", "batch")
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
