"""Clocks held below their maximum by the power limit or by heat (clock-event reasons)."""

from __future__ import annotations

from fleet_tui.core.monitor.analysis.diagnosis import Finding
from fleet_tui.core.monitor.analysis.rules.common import clamp
from fleet_tui.core.monitor.analysis.thresholds import CLOCK_BELOW_MAX_FRAC, POWER_CAP_MIN_SHARE, THERMAL_MIN_SHARE
from fleet_tui.core.monitor.analysis.window import WindowStats


def _clock_frac(st: WindowStats) -> float | None:
    return (st.sm_clock / st.sm_clock_max) if st.sm_clock and st.sm_clock_max else None


def power_capped(st: WindowStats) -> Finding | None:
    clock_frac = _clock_frac(st)
    if not (st.power_share is not None and st.power_share >= POWER_CAP_MIN_SHARE
            and clock_frac is not None and clock_frac < CLOCK_BELOW_MAX_FRAC):
        return None
    pct_below = (1 - clock_frac) * 100
    ev = {"power_cap_share": st.power_share, "sm_clock_mhz": st.sm_clock,
          "sm_clock_max_mhz": st.sm_clock_max, "clock_below_max_pct": pct_below,
          "power_w": st.power_w, "power_limit_w": st.power_limit_w}
    return Finding(
        clamp(0.5 + st.power_share * 0.3 + pct_below / 100), ev,
        lambda: f"Power cap (clock reason 0x4) in {st.power_share:.0%} of samples: SM clock "
        f"{st.sm_clock:.0f} of {st.sm_clock_max:.0f} MHz ({pct_below:.0f}% below max), "
        f"power {st.power_w or 0:.0f} of {st.power_limit_w or 0:.0f} W.")


def thermal_throttled(st: WindowStats) -> Finding | None:
    hot = st.temp_c is not None and st.slowdown_temp_c is not None and \
        st.temp_c >= st.slowdown_temp_c
    if not ((st.thermal_share is not None and st.thermal_share >= THERMAL_MIN_SHARE) or hot):
        return None
    clock_frac = _clock_frac(st)
    below = clock_frac is not None and clock_frac < CLOCK_BELOW_MAX_FRAC
    ev = {"thermal_share": st.thermal_share, "temp_c": st.temp_c,
          "slowdown_temp_c": st.slowdown_temp_c, "sm_clock_mhz": st.sm_clock,
          "sm_clock_max_mhz": st.sm_clock_max}
    share = st.thermal_share or 0.0
    return Finding(
        clamp(0.6 + 0.4 * share + (0.2 if hot else 0.0)), ev,
        lambda: f"Thermal slowdown (clock reasons 0x8/0x20/0x40) in {share:.0%} of samples at "
        f"{st.temp_c or 0:.0f} C (slowdown at {st.slowdown_temp_c or 0:.0f} C)"
        + (f", SM clock {st.sm_clock:.0f} of {st.sm_clock_max:.0f} MHz." if below else "."),
        hot)  # at the slowdown temperature: urgent
