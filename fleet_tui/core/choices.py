"""The choices a workload offers, in the order front ends list them (CLI ``choices=``, the builder's
selects, :class:`~fleet_tui.core.workload.Workload`'s field types). No imports: the CLI builds its
parser from these without loading pydantic, so ``--help`` stays fast."""

KINDS = ("inference", "training", "finetune", "lora", "qlora")
PRECISIONS = ("fp32", "fp16", "bf16", "fp8", "fp4", "int8", "int4")
OPTIMIZERS = ("adamw", "adamw8bit", "paged_adamw8bit", "sgd", "adafactor")
SHARDINGS = ("data", "tensor", "fsdp")
MASTER_WEIGHTS = ("fp32", "none")
SERVING_MODES = ("interactive", "batch")
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
ENGINES = ("vllm", "trtllm", "sglang", "hf")  # serving engines (core/perf/engines.py profiles)
KV_CACHE_DTYPES = ("auto", "fp16", "bf16", "fp8", "int8")  # auto = the compute dtype
FRAMEWORKS = ("hf", "torchtune", "unsloth", "deepspeed", "torchtitan", "megatron", "nemo", "maxtext",
              "optimum-habana", "neuronx")  # training stacks (core/frameworks.py presets)
OFFLOAD_TARGETS = ("activations", "optimizer", "params")  # what a training run may keep in CPU memory
