"""What fleet-tui reads from each exporter: metric names -> ``DeviceSnapshot`` fields and units,
per exporter (NVIDIA dcgm-exporter ``DCGM_FI_*``, Intel Gaudi ``habanalabs_*``, AWS
neuron-monitor ``neuroncore_*``), and which are read every refresh or once a minute.
Names, units and labels: NVIDIA/dcgm-exporter ``etc/default-counters.csv`` and ``render_metrics.go``
(DCGM), docs.habana.ai's Prometheus metric exporter page (Gaudi), AWS Neuron's
``neuron-monitor-user-guide`` (Neuron)."""

from __future__ import annotations

from fleet_tui.core.monitor.snapshot import CLOCK_EVENT_SW_POWER_CAP, CLOCK_EVENT_SW_THERMAL

MIB = 1024 * 1024

# DCGM writes int64/float blank sentinels (e.g. 9223372036854775794) for "no value"; anything this
# large is not a reading (dcgm-exporter's blank values).
BLANK_THRESHOLD = 9.0e18

# -- metric map --------------------------------------------------------------------------------
# name -> (DeviceSnapshot field, scale). Scale converts the exporter's unit to the field's unit.
DCGM_FIELDS: dict[str, tuple[str, float]] = {
    "DCGM_FI_DEV_GPU_UTIL": ("gpu_util_pct", 1.0),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("mem_util_pct", 1.0),
    "DCGM_FI_DEV_GPU_TEMP": ("temp_c", 1.0),
    "DCGM_FI_DEV_SLOWDOWN_TEMP": ("slowdown_temp_c", 1.0),
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", 1.0),
    "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", 1.0),
    "DCGM_FI_DEV_MAX_SM_CLOCK": ("sm_clock_max_mhz", 1.0),
    "DCGM_FI_DEV_MEM_CLOCK": ("mem_clock_mhz", 1.0),
    "DCGM_FI_DEV_MAX_MEM_CLOCK": ("mem_clock_max_mhz", 1.0),
    "DCGM_FI_PROF_PCIE_TX_BYTES": ("pcie_tx_bytes_s", 1.0),  # bytes/s
    "DCGM_FI_PROF_PCIE_RX_BYTES": ("pcie_rx_bytes_s", 1.0),
    "DCGM_FI_PROF_NVLINK_TX_BYTES": ("nvlink_tx_bytes_s", 1.0),
    "DCGM_FI_PROF_NVLINK_RX_BYTES": ("nvlink_rx_bytes_s", 1.0),
    # DCP profiling metrics are ratios 0-1; snapshots hold percent
    "DCGM_FI_PROF_SM_ACTIVE": ("sm_active_pct", 100.0),
    "DCGM_FI_PROF_SM_OCCUPANCY": ("sm_occupancy_pct", 100.0),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("tensor_active_pct", 100.0),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("dram_active_pct", 100.0),
    "DCGM_FI_PROF_PIPE_FP32_ACTIVE": ("fp32_active_pct", 100.0),
    "DCGM_FI_PROF_PIPE_FP16_ACTIVE": ("fp16_active_pct", 100.0),
    "DCGM_FI_PROF_PIPE_FP64_ACTIVE": ("fp64_active_pct", 100.0),
}
# read specially (memory sums, bit masks, counters, limits with fallbacks)
DCGM_SPECIAL = (
    "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED", "DCGM_FI_DEV_FB_TOTAL",
    "DCGM_FI_DEV_POWER_MGMT_LIMIT", "DCGM_FI_DEV_ENFORCED_POWER_LIMIT",
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "DCGM_FI_DEV_PSTATE",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
    "DCGM_FI_DEV_POWER_VIOLATION", "DCGM_FI_DEV_THERMAL_VIOLATION",
    "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION", "DCGM_FI_DEV_RELIABILITY_VIOLATION",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
)
# Violation counters are nanoseconds throttled; their rate / 1e9 is the throttled share of time.
VIOLATION_BITS = {
    "DCGM_FI_DEV_POWER_VIOLATION": ("power_violation_frac", CLOCK_EVENT_SW_POWER_CAP),
    "DCGM_FI_DEV_THERMAL_VIOLATION": ("thermal_violation_frac", CLOCK_EVENT_SW_THERMAL),
    "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION": ("board_limit_violation_frac", 0x200),
    "DCGM_FI_DEV_RELIABILITY_VIOLATION": ("reliability_violation_frac", 0x400),
}
VIOLATION_ACTIVE_FRAC = 0.05  # throttled >5% of the interval counts as "this reason is active"

HABANA_FIELDS: dict[str, tuple[str, float]] = {
    "habanalabs_utilization": ("gpu_util_pct", 1.0),
    "habanalabs_memory_used_bytes": ("mem_used_bytes", 1.0),
    "habanalabs_memory_total_bytes": ("mem_total_bytes", 1.0),
    "habanalabs_temperature_onchip": ("temp_c", 1.0),
    "habanalabs_temperature_threshold_slowdown": ("slowdown_temp_c", 1.0),
    "habanalabs_power_mW": ("power_w", 0.001),
    "habanalabs_power_default_limit_mW": ("power_limit_w", 0.001),
    "habanalabs_clock_soc_mhz": ("sm_clock_mhz", 1.0),
    "habanalabs_clock_soc_max_mhz": ("sm_clock_max_mhz", 1.0),
}
# AMD device-metrics-exporter (ROCm/device-metrics-exporter, docs/configuration/metricslist.md):
# lower-case names of its GPU_* fields, labelled gpu_id, gpu_uuid/serial_number, hostname,
# card_series/card_model, gpu_partition_id. VRAM in MB (MiB, as amd-smi), power in W.
AMD_FIELDS: dict[str, tuple[str, float]] = {
    "gpu_gfx_activity": ("gpu_util_pct", 1.0),
    "gpu_umc_activity": ("mem_util_pct", 1.0),
    "gpu_used_vram": ("mem_used_bytes", MIB),
    "gpu_total_vram": ("mem_total_bytes", MIB),
    "gpu_power_usage": ("power_w", 1.0),
    "gpu_junction_temperature": ("temp_c", 1.0),  # hotspot, MI3xx
    "gpu_ecc_correct_total": ("ecc_corrected", 1.0),
    "gpu_ecc_uncorrect_total": ("ecc_uncorrected", 1.0),
}
AMD_SPECIAL = ("gpu_edge_temperature",)  # MI2xx: the temperature when no junction reading
# Not read from AMD's exporter (and so not diagnosed on AMD fleets): SM activity/tensor pipes
# (only its optional profiler fields GPU_PROF_*), clocks (one gpu_clock metric split by a
# clock_type label), the power cap and throttle reasons.
NEURON_NAMES = ("neuroncore_utilization_ratio", "neuron_hardware_info",
                "neuron_runtime_memory_used_bytes")

# one series per device whose sample timestamp gives the reading's age
AGE_PROBES = {"DCGM_FI_DEV_GPU_UTIL": "nvidia", "habanalabs_utilization": "intel",
              "neuroncore_utilization_ratio": "aws", "gpu_gfx_activity": "amd"}
# Set operators match label sets ignoring __name__, so the timestamp series carry an extra label to
# survive ``or`` next to the series they time.
PROBE_LABEL = "fleet_tui_probe"

ALL_NAMES: tuple[str, ...] = (*DCGM_FIELDS, *DCGM_SPECIAL, *HABANA_FIELDS, *NEURON_NAMES,
                               *AMD_FIELDS, *AMD_SPECIAL)

# Facts that change rarely (limits, maxima, totals, ECC counters) and the model name are read by a
# second, slower-cadence query and cached per device: the per-refresh query then carries only what
# moves, which keeps a 1,024-GPU refresh within its CPU budget (bench/bench_fleet.py).
STATIC_NAMES: tuple[str, ...] = (
    "DCGM_FI_DEV_SLOWDOWN_TEMP", "DCGM_FI_DEV_MAX_SM_CLOCK", "DCGM_FI_DEV_MAX_MEM_CLOCK",
    "DCGM_FI_DEV_POWER_MGMT_LIMIT", "DCGM_FI_DEV_ENFORCED_POWER_LIMIT",
    "DCGM_FI_DEV_FB_RESERVED", "DCGM_FI_DEV_FB_TOTAL",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
    "habanalabs_memory_total_bytes", "habanalabs_temperature_threshold_slowdown",
    "habanalabs_power_default_limit_mW", "habanalabs_clock_soc_max_mhz", "neuron_hardware_info",
    "gpu_total_vram",
)
DYNAMIC_NAMES: tuple[str, ...] = tuple(
    n for n in ALL_NAMES if n not in STATIC_NAMES and n != "neuron_runtime_memory_used_bytes")
# The labels that say which device a DCGM series is about; the others
# (pci_bus_id, device, driver version, job, pod/namespace/container, err_msg) are dropped server-side
# by ``max by``, which roughly halves the answer. Gaudi/Neuron label sets are not documented, so
# their series are read whole.
DCGM_ID_LABELS = ("gpu", "UUID", "uuid", "Hostname", "hostname", "instance", "GPU_I_ID")

# -- who holds a device ------------------------------------------------------------------------
# Labels that name the job, pod or user on a device's series. dcgm-exporter: ``hpc_job`` (with
# --hpc-job-mapping-dir) and ``pod``/``namespace``/``container`` (Kubernetes pod mapping); AMD's
# device-metrics-exporter: ``job_id``/``job_user``/``job_partition`` (Slurm integration,
# docs/integrations/slurm-integration.md) and the same Kubernetes labels. Read by
# ``core.cluster.promjobs`` in a query of its own, since the per-refresh query drops them.
JOB_LABELS = ("hpc_job", "hpc_user", "pod", "namespace", "container", "job_id", "job_user",
              "job_partition")
# One series per device that every exporter of that vendor publishes, to carry the labels above.
JOB_CARRIERS = ("DCGM_FI_DEV_GPU_UTIL", "gpu_gfx_activity")
# Princeton jobstats' GPU exporter (PrincetonUniversity/jobstats, docs/setup/gpu_node_scripts.md):
# gauges whose value is the Slurm job id / the job owner's uid, labelled minor_number and uuid.
JOB_ID_GAUGE = "nvidia_gpu_jobId"
JOB_UID_GAUGE = "nvidia_gpu_jobUid"
