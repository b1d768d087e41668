"""NVIDIA GPUs through NVML (``nvidia-ml-py``, imported as ``pynvml``).

Exact calls and their caveats: the NVML API reference (docs.nvidia.com/deploy/nvml-api) and
nvidia-ml-py's ``pynvml.py``. How this source
treats them:

* All NVML work of one tick happens in ONE worker-thread call (``asyncio.to_thread``) that reads
  every device, so the event loop never blocks and a tick costs one thread hop.
* A function that answers NOT_SUPPORTED / FUNCTION_NOT_FOUND / NO_PERMISSION is learned once per
  (device, function): it is never called again and the metrics it feeds are listed in
  ``DeviceSnapshot.unsupported``. Other errors (TIMEOUT, UNKNOWN...) are reported for that tick only.
* ``NVML_ERROR_GPU_IS_LOST`` marks that device ``state="lost"`` (not retried: a lost GPU needs a
  reset or reboot); the other devices keep updating.
* No driver / no library -> ``SourceUnavailable`` with a sentence saying so.
* GPM (Hopper+): two samples per device are kept and swapped; metrics describe the interval between
  the previous tick and this one (NVML GPM docs), so the first tick has none.
* PCIe: GPM's PCIe metrics when present; otherwise ``nvmlDeviceGetPcieThroughput``, which blocks
  ~21 ms per call (it samples a 20 ms window; ``tests/fixtures/h200/nvml_latency.json``). It is read
  for at most ONE device per tick, and for each device at most every ``pcie_interval_s`` seconds;
  the last value is reused in between.
* MIG: utilization rates and GPM of the parent are not supported on MIG-enabled GPUs (NVML docs);
  they are marked unsupported, and memory is read per MIG device into ``extra``
  (``mig<N>.mem_used_bytes`` / ``mig<N>.mem_total_bytes`` / ``mig<N>.gpu_instance_id``).
* XID: there is no "last XID" query, only events. A daemon thread waits on an event set registered
  for ``nvmlEventTypeXidCriticalError``; ``DeviceSnapshot.xid_errors`` holds the XIDs seen since the
  source opened (last 16, oldest first). Events before ``open()`` are not seen (NVML docs).
* Slow-changing values (enforced power limit, ECC volatile counters, PCIe link, MIG memory) are read
  every ``slow_interval_s`` (default 10 s) to keep the per-tick call count low.

The package, bottom to top: ``codes`` (NVML return codes, what is learned as N/A and the snapshot
fields it leaves empty, start-up failures as sentences), ``device`` (``Device``: a handle and what
was learned about it; ``DeviceCalls``: the one learned way to call NVML), ``gpm`` (GPM samples,
metrics request and its ctypes views), ``events`` (``XidWatcher``: the XID event thread), ``reads``
(``DeviceReader``: static facts at open, one tick's values, the slow group, MIG memory, processes),
``source`` (``NvmlSource``: lifecycle and the tick loop).
"""

from __future__ import annotations

from fleet_tui.core.monitor.sources.nvml.codes import FIELDS_OF
from fleet_tui.core.monitor.sources.nvml.source import NvmlSource

__all__ = ["FIELDS_OF", "NvmlSource"]
