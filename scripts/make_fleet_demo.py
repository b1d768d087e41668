"""Write the bundled fleet recording ``fleet_tui/demo/fleet_demo.json`` (played by
``--source fleet-replay:demo``).

The recording is a seeded two-week schedule of GPU jobs on 32 nodes × 8 H200 GPUs (users,
accounts, partitions, submit/start/end, GPUs by node and index, and the workload phase each job's
GPUs run), plus the dcgm-exporter identity of every GPU (Hostname, gpu, UUID, device, modelName).
The readings themselves are not invented: the source plays, for each GPU, the frames of the bundled
real H200 trace (``fleet_tui/demo/h200_trace_labelled.jsonl``) labelled with that GPU's phase, so
every value on screen was measured on a real GPU. Regenerate with
``python scripts/make_fleet_demo.py`` (deterministic).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "fleet_tui" / "demo" / "fleet_demo.json"
NODES, GPUS = 32, 8
HOURS = 14 * 24
# phases of the H200 trace a job's GPUs may run (weights: most jobs compute)
PHASES = (("compute_bound", 5), ("hbm_bandwidth_bound", 2), ("input_starved", 2),
          ("launch_bound", 1), ("idle", 2), ("memory_capacity_full", 1))
USERS = (("ana", "vision"), ("bo", "vision"), ("cy", "nlp"), ("di", "nlp"), ("ed", "nlp"),
         ("fu", "speech"))


def main() -> None:
    rng = random.Random(20261208)
    nodes = [f"gpu{n:03d}" for n in range(NODES)]
    free_at = {(n, i): 0.0 for n in nodes for i in range(GPUS)}  # hours
    jobs = []
    t, jid = 0.0, 41000
    while t < HOURS:
        t += rng.expovariate(1 / 0.35)
        size = rng.choice((1, 2, 4, 8, 8, 16))
        hours = min(rng.lognormvariate(1.2, 0.9), 48.0)
        slots = sorted(free_at, key=lambda s: (free_at[s], s))[:size]
        if size >= 8:  # whole nodes for large jobs
            first = sorted(nodes, key=lambda n: max(free_at[(n, i)] for i in range(GPUS)))
            slots = [(n, i) for n in first[: size // 8] for i in range(GPUS)]
        start = max(t, max(free_at[s] for s in slots))
        end = start + hours
        if start >= HOURS:
            break
        for s in slots:
            free_at[s] = end
        user, account = rng.choice(USERS)
        phase = rng.choices([p for p, _ in PHASES], [w for _, w in PHASES])[0]
        jid += 1
        jobs.append({"job": str(jid), "user": user, "account": account,
                     "partition": "gpu", "name": f"{account}-{phase.split('_')[0]}",
                     "submit_h": round(t, 3), "start_h": round(start, 3), "end_h": round(end, 3),
                     "limit_h": round(hours * rng.uniform(1.1, 2.5) + 0.5, 1), "phase": phase,
                     "gpus": [f"{n}:{i}" for n, i in slots]})
    doc = {"about": "fleet-tui demo fleet recording: 32 nodes x 8 H200, a two-week job schedule; "
                    "readings are frames of the real H200 trace by phase (scripts/"
                    "make_fleet_demo.py)",
           "hours": HOURS, "model": "NVIDIA H200", "gpus_per_node": GPUS,
           "nodes": nodes, "jobs": jobs}
    OUT.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"{OUT}: {len(jobs)} jobs, {OUT.stat().st_size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
