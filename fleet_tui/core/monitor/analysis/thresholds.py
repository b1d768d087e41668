"""Diagnosis thresholds. Each one is derived from what the signal means (see the package docstring);
none is fitted to a trace."""

from __future__ import annotations

from fleet_tui.core.monitor.snapshot import (
                                             CLOCK_EVENT_HW_POWER_BRAKE,
                                             CLOCK_EVENT_HW_SLOWDOWN,
                                             CLOCK_EVENT_HW_THERMAL,
                                             CLOCK_EVENT_SW_POWER_CAP,
                                             CLOCK_EVENT_SW_THERMAL,
)

# NVML utilization is reported in whole percent and GPM's SM activity reads ~0.0-0.01% on an idle
# GPU, so a window mean under half a percent on both means no kernel ran in most samples.
ACTIVITY_MIN_PCT = 0.5
# "Busy": on average at least half the SMs hold a warp (GPM SM active). Below that, more of the
# GPU waits than works, whatever the cause.
BUSY_SM_MIN_PCT = 50.0
# Kernel duty cycle (NVML gpu_util) under which the GPU waits more than it works.
SPARSE_DUTY_MAX_PCT = 50.0
# Bursty starvation: SMs under "busy" on average and at least 30% of the samples are waits
# (a third of the time lost between bursts is worth fixing).
BURSTY_WAIT_SHARE = 0.3
# Launch-bound: kernels run a noticeable share of the time (>= 10% duty, well above noise) but fill
# under a fifth of the SMs while they run (sm_active / gpu_util < 0.2), i.e. each kernel is a few
# thread blocks on a GPU with over a hundred SMs.
LAUNCH_MIN_DUTY_PCT = 10.0
LAUNCH_MAX_FILL = 0.2
# Tensor cores "busy": a quarter of cycles issue tensor instructions. A large bf16 GEMM reaches
# 90%+; well-tuned LLM training runs at 40-60% (MFU-level); plain FP32 code is ~0.
TENSOR_ACTIVE_MIN_PCT = 25.0
# Tensor cores essentially unused (below a tenth of cycles) while SMs are busy and the FP32 pipe
# is issuing on at least a fifth of cycles: the math runs on CUDA cores in FP32.
TENSOR_UNUSED_MAX_PCT = 10.0
FP32_ACTIVE_MIN_PCT = 20.0
# HBM bandwidth bound: achieved bandwidth >= 60% of peak. Roofline practice (Nsight Compute
# marks throughput over 60% of peak as high); a device-to-device copy on the H200 sustains ~88% of
# peak, so 60% is within ~70% of what is attainable.
DRAM_BOUND_PCT = 60.0
# NVML mem_util is the % of *time* memory was read or written (not bandwidth), and overstates
# bandwidth (98.6% time vs 87% bandwidth on a copy); the fallback rule asks more of it.
MEM_UTIL_BOUND_PCT = 80.0
# Host transfer bound: PCIe traffic in one direction >= 40% of the link's theoretical rate. Pinned
# copies reach ~85-90% of it (TLP overhead), pageable ones roughly half: both are "saturated" for
# what the software path allows. Busy time with no SM activity and >= 10% of the link is also
# explained by copies rather than tiny kernels.
PCIE_SATURATED_FRAC = 0.40
PCIE_COPY_EXPLAINS_FRAC = 0.10
# Per-lane rates (GT/s) and line-code efficiency by PCIe generation (PCI-SIG specifications).
PCIE_GT_S = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
PCIE_ENCODING = {1: 0.8, 2: 0.8, 3: 128 / 130, 4: 128 / 130, 5: 128 / 130, 6: 242 / 256}
PCIE_ASSUMED_GEN, PCIE_ASSUMED_WIDTH = 5, 16  # when the source does not report the link
# Memory capacity pressure: under 10% of device memory free. The caching allocator rounds and
# fragments blocks, and activation/KV spikes are larger than that on a big model: the next one OOMs.
MEM_PRESSURE_FRAC = 0.90
# Under 5% free the pressure is urgent (outranks the bottleneck): that is less than one
# activation/KV spike of a mid-size model, and the allocator's fragmentation alone can eat it.
MEM_CRITICAL_FRAC = 0.95
# Memory growth: a robust (Theil-Sen) slope over a longer lookback, counted from the last release
# of memory (a fall of >= 1% of the device), with at least 3 separate rises over >= 4 s and few
# falls (one allocation step is not a leak), growth of at least 1% of the device memory, and
# memory full within a day at that rate.
GROWTH_LOOKBACK_S = 60.0
GROWTH_MIN_SPAN_S = 4.0
GROWTH_MIN_RISES = 3
GROWTH_MIN_FRAC_OF_TOTAL = 0.01
GROWTH_HORIZON_S = 24 * 3600.0
GROWTH_MAX_POINTS = 40  # Theil-Sen is O(n^2): subsample
# Growth that continues: a leak allocates every step or every few steps, so rises come at most
# GROWTH_MAX_FLAT_S apart, and the last one is at most that long ago. One-off allocations at
# phase changes (model load, then buffers) are steps with long plateaus between them: a staircase,
# not a trend. 10 s = several training steps even at a few seconds per step.
GROWTH_MAX_FLAT_S = 10.0
# A device filling up is flagged whatever the step pattern: at least half its memory used and a
# positive robust slope over the last GROWTH_RECENT_S with at least 2 rises in it.
GROWTH_FILLING_FRAC = 0.5
GROWTH_RECENT_S = 10.0
# Full within 10 minutes: a risk that cannot wait (outranks the bottleneck as primary).
GROWTH_IMMINENT_S = 600.0
# ... on the evidence of twice the rises that make growth at all: three one-off 512 MiB allocations
# in 2 s extrapolate to "full in 6 minutes" on an 80 GiB GPU, which a few steps cannot show. A
# device that is already filling up (GROWTH_FILLING_FRAC) needs no more rises.
GROWTH_IMMINENT_MIN_RISES = 2 * GROWTH_MIN_RISES
# A leak grows in many small steps; one allocation is one big step. Ignore changes under 1 MiB
# (driver bookkeeping) and reject growth where one step makes up more than half of it.
GROWTH_NOISE_BYTES = 2**20
GROWTH_MAX_SINGLE_STEP_FRAC = 0.5
# Power/thermal: the reason bit is set in at least half (power) / a third (thermal) of the samples
# and the SM clock averages at least 5% below its maximum (otherwise the cap costs nothing).
POWER_CAP_MIN_SHARE = 0.5
THERMAL_MIN_SHARE = 0.3
CLOCK_BELOW_MAX_FRAC = 0.95
# Fallback power rule (no GPM): switching activity drives power, so a GPU kept "busy" by NVML's
# measure at under 30% of its power limit does little work per unit time; above 50% it computes.
POWER_LOW_FRAC = 0.30
POWER_HIGH_FRAC = 0.50

# Clock-event reason bits that mean heat / the power limit slowed the clocks.
THERMAL_BITS = CLOCK_EVENT_SW_THERMAL | CLOCK_EVENT_HW_THERMAL | CLOCK_EVENT_HW_SLOWDOWN
POWER_BITS = CLOCK_EVENT_SW_POWER_CAP | CLOCK_EVENT_HW_POWER_BRAKE

# Communication-bound: NVLink traffic in one direction >= 30% of the link's peak while the SMs are
# not busy: the GPU waits on collectives (NCCL all-reduce / all-gather) it does not overlap. Peaks
# per direction from NVIDIA's datasheets (NVLink bandwidth is quoted bidirectional: H100/H200 SXM
# 900 GB/s, A100 SXM 600 GB/s, B200 1.8 TB/s); matched on the device name, the most specific first.
NVLINK_BUSY_FRAC = 0.30
NVLINK_PEAK_BYTES_S = (("GH200", 450e9), ("H200", 450e9), ("H100", 450e9), ("H800", 200e9),
                       ("A100", 300e9), ("A800", 200e9), ("B200", 900e9), ("B300", 900e9),
                       ("GB200", 900e9), ("V100", 150e9))
NVLINK_ASSUMED_PEAK_BYTES_S = 300e9
# CPU-bound host: the GPU waits and the host's CPUs are busy: >= 90% of all cores on average, or
# at least one core at >= 90% (a loader process with num_workers=0, or its main process, is
# single-threaded Python: one saturated core is its limit).
HOST_SATURATED_PCT = 90.0
# ... "at least one core" over a window: a saturated core in three samples of four on average
# (per-core readings over a fraction of a second jitter: a pegged loader process reads 60-100%).
HOST_BUSY_CORES_MIN = 0.75
# Kernels ran at all: GPM SM activity over the window at or above 0.001 %. An idle GPU reads 0.0
# (H100) to 2.4e-5 % (H200) on GPM; a loader that runs one small step every few hundred ms reads
# 0.01-0.1 %. A window with a trickle of kernels, a process on the GPU and a saturated host core
# is a GPU starved by its host, not an idle one.
KERNEL_TRICKLE_SM_PCT = 0.001
# Memory headroom: a GPU that computes (kernels >= 50% of the time) with under half its memory in
# use can take a larger batch (or a smaller, cheaper GPU).
HEADROOM_MAX_FRAC = 0.5

# Time to impact (memory): the rate is read on the freshest readings, the last FRESH_S seconds
# (a leak that fills 60 GB in 5 s is over before a 60 s trend notices it). Full memory within
# OOM_CRITICAL_S at that rate is an out-of-memory error about to happen: critical, the device's
# primary line whatever limits its work. A minute is what a person needs to checkpoint or stop it.
FRESH_S = 5.0
OOM_CRITICAL_S = 60.0
# ... on at least two separate rises in those seconds (one allocation is a step, not a rate), the
# rate a robust (Theil-Sen) slope: one big step among small ones does not set it; and projected no
# further ahead than OOM_EXTRAPOLATE times as long as the rises have lasted: a model's weights
# arriving at 5 GB/s for 3 s and a leak look alike, but 3 s of evidence says nothing of 25 s on.
FRESH_MIN_RISES = 2
OOM_EXTRAPOLATE = 3.0
# ... and, for that robust slope, on rises that have lasted at least 2 s (a slope over fewer
# readings is set by single steps); shorter runs are judged by their mean rate (below).
OOM_MIN_RISING_S = 2.0
# ... or, in a fast leak's first seconds, before those 2 s: a steady ramp, the newest
# RAMP_MIN_RISES rises alike in size and spacing (within RAMP_TOLERANCE of their medians: a
# loop allocating the same bytes each step), full within OOM_CRITICAL_S at its rate, and no
# host-to-device traffic at half that rate (a copy's rises are alike because the link paces
# them, not a loop; it stops when the data is in). Two rises are not a ramp: the demo's job
# starts allocate bursts of unlike sizes (2.5, 4.7, 5.4 GB in 0.2 s steps), an engine pool one
# step.
RAMP_MIN_RISES = 3
RAMP_TOLERANCE = 0.25
# ... or, whatever the rises look like, on the current run of rises alone: full within
# OOM_CRITICAL_S at its mean rate (over its freshest FRESH_S, from BURST_MIN_SPAN_S before its
# first rise, NVML's own averaging period: a step read one reading after the one before it is
# not bytes per sampling interval), projected no further than OOM_EXTRAPOLATE times as long as
# the run has lasted (the run, done again three times, fills the device). Whatever the cause:
# nothing in a leak's first second (a step from low, a few rises) tells it from a job's start or
# a load, and any of them that goes on at that rate runs out of memory within seconds; the
# plateau that ends a start or a load (PLATEAU_MIN_S, one step included) drops it. Without the
# projection bound every allocation of 1/60 of the free memory would be "full within a minute"
# (the bundled trace's job starts: 124 critical ticks, a 1.5 GB allocation on an H100 "full in
# 57 s"; bench_diagnosis_accuracy, docs/monitor.md).
BURST_MIN_SPAN_S = 1.0
# A plateau is not growth: no rise for twice the spacing of the fresh rises (at least
# PLATEAU_MIN_S) means the filling stopped.
PLATEAU_MIN_S = 1.5
# Serving engines reserve their KV-cache pool at start: vLLM gpu_memory_utilization (default 0.9
# of the device), SGLang mem_fraction_static (~0.88), TensorRT-LLM kv_cache_free_gpu_mem_fraction
# (0.9 of what is free after the weights), TGI/LMDeploy likewise: a step to a flat 85-96 % by
# design, not a leak and not pressure. Matched on a process's command line (lower case).
SERVING_ENGINES = (("vllm", "vLLM"), ("sglang", "SGLang"), ("tensorrt_llm", "TensorRT-LLM"),
                   ("trtllm", "TensorRT-LLM"), ("tritonserver", "Triton"),
                   ("text-generation-launcher", "TGI"), ("text_generation_server", "TGI"),
                   ("lmdeploy", "LMDeploy"))
ENGINE_POOL_MIN_FRAC = 0.85
ENGINE_POOL_MAX_FRAC = 0.96
