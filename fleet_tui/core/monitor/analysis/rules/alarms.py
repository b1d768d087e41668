"""Hardware alarms: a lost device, XID errors, uncorrectable ECC errors. Checked even on a device
that stopped answering."""

from __future__ import annotations

from fleet_tui.core.monitor.analysis.diagnosis import Finding
from fleet_tui.core.monitor.analysis.window import WindowStats


def device_lost(st: WindowStats) -> Finding | None:
    if not st.lost:
        return None
    return Finding(1.0, {"state": "lost"},
                   lambda: "The device stopped answering (NVML: GPU is lost).")


def xid(st: WindowStats) -> Finding | None:
    if not st.xids:
        return None
    return Finding(1.0, {"xid_codes": ",".join(map(str, st.xids))},
                   lambda: f"The driver reported XID error(s) {', '.join(map(str, st.xids))}.")


def ecc_errors(st: WindowStats) -> Finding | None:
    if not (st.ecc_uncorrected_delta > 0 or (st.ecc_uncorrected_last or 0) > 0):
        return None
    rising = st.ecc_uncorrected_delta > 0
    return Finding(1.0 if rising else 0.7,
                   {"ecc_uncorrected": st.ecc_uncorrected_last,
                    "ecc_uncorrected_new": st.ecc_uncorrected_delta},
                   lambda: f"{st.ecc_uncorrected_last} uncorrectable ECC error(s)"
                   + (f", {st.ecc_uncorrected_delta} new in this window." if rising else "."))
