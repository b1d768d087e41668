"""Change points: where a device's behaviour changes, so that no diagnosis averages two behaviours.

Method: a two-sided CUSUM (Page 1954) per feature over the samples of one device, online.

* Each sample becomes a feature vector on a common 0-1 scale (``features``): kernel duty cycle, SM
  activity, tensor, DRAM, FP32 activity, PCIe share of the link, power share of the limit, the
  share of memory used and, where the host's per-core CPU is known, whether a host core is
  saturated (a data loader that starts or stops changes the host, not the GPU's counters, when
  its kernels are tiny). Missing readings are skipped, not zeros.
* The vector is smoothed with an exponential moving average of time constant ``SMOOTH_S`` (at
  least ``SMOOTH_SAMPLES`` samples): NVML
  averages utilization over up to a second, and a starved loader alternates busy and idle samples
  at the sampling rate; both are one behaviour, not many.
* Against the running mean of the current phase, each feature keeps ``S+ = max(0, S+ + x - m - k)``
  and ``S- = max(0, S- + m - x - k)``; when one passes ``h`` the phase ends. The new phase starts
  where that sum last left zero (the CUSUM's own change-point estimate), so the samples of the
  detection delay belong to the new phase.
* A phase lasts at least ``MIN_PHASE_S``: no alarm is taken before that (a blip between two
  behaviours stays inside the phase it interrupts).

``k`` is half the smallest shift worth a new phase (``SHIFT_MIN``: 15 points of a 0-100 % signal,
the width of the bands the rules separate, e.g. 50 % duty vs 35 %) and ``h`` is how much evidence
a shift needs (``h / (shift - k)`` samples: 5 samples of a 20-point shift, 1-2 of a 60-point
shift). Tuned on the labelled H200 trace only; scored on held-out traces by
bench/bench_diagnosis_accuracy.py.
"""

from __future__ import annotations

from collections.abc import Sequence

from fleet_tui.core.monitor.analysis.tallies import read_row
from fleet_tui.core.monitor.analysis.window import link_of
from fleet_tui.core.monitor.snapshot import DeviceSnapshot

SMOOTH_S = 0.6
SMOOTH_SAMPLES = 3
SHIFT_MIN = 0.15
CUSUM_K = SHIFT_MIN / 2
CUSUM_H = 0.6
MIN_PHASE_S = 3.0
# No memory-slope feature: a leak grows in steps (a rise every second or so, flat between), so
# its per-sample slope alternates between a spike and zero and the CUSUM drifts on it, raising a
# change point as soon as each phase is MIN_PHASE_S old (the H100 corpus, take a: a leak in 3 s
# slices, and its end found 1 s late). Growth is the memory_growth rule's, over its own lookback;
# the level of memory used is a feature, so an allocation that fills a device still moves it.
N_FEATURES = 9


def smoothing_s(dt: float | None) -> float:
    """The smoothing's time constant at a sampling interval of ``dt`` seconds: also how far the
    change points trail a change (the smoothed features need about that long to move)."""
    span = SMOOTH_SAMPLES * dt if dt and dt > 0 else 0.0
    return span if span > SMOOTH_S else SMOOTH_S


def host_busy_of(host) -> float | None:
    """The host feature of one sample's ``window.HostLoad``: 1.0 when a core is saturated, 0.0
    when none is, None without per-core readings."""
    if host is None or not host.cores:
        return None
    return 1.0 if host.busy_cores >= 1 else 0.0


def features_of(row: tuple, limit: float | None, total: int | None, link_bytes_s: float,
                host_busy: float | None = None) -> list[float | None]:
    """``features`` from plain values: the sample's ``read_row``, power limit and memory size,
    the link rate, and ``host_busy_of`` its host reading."""
    (util, _mem_util, sm, tensor, dram, fp32, _fp16, power_w, _clock, _temp, rx, tx, used,
     _nv_rx, _nv_tx) = row
    duty = util / 100.0 if util is not None else None
    if sm is not None:
        sm /= 100.0
        if duty is None:
            duty = sm
    if tensor is not None:
        tensor /= 100.0
    if dram is not None:
        dram /= 100.0
    if fp32 is not None:
        fp32 /= 100.0
    # min/max written as comparisons that pick the same operand as the builtins (once per
    # sample: the builtin calls were ~0.4 us of bench_analysis --lines' per-line cost)
    pcie = None
    if rx is not None or tx is not None:
        rx = rx or 0.0
        tx = tx or 0.0
        pcie = (tx if tx > rx else rx) / link_bytes_s  # max(rx, tx) / link
        if not pcie < 1.0:
            pcie = 1.0
    power = None
    if power_w is not None and limit:
        power = power_w / limit
        if not power < 1.0:
            power = 1.0
    mem = used / total if used is not None and total else None
    return [duty, sm, tensor, dram, fp32, pcie, power, mem, host_busy]


class PhaseDetector:
    """Online change points of one device. ``push`` each sample (oldest first); it returns the
    timestamp where a new phase began when the sample confirms one, else None."""

    __slots__ = ("min_phase_s", "h", "k", "_ema", "_sum", "_n", "_pos", "_neg", "_pos_t",
                 "_neg_t", "_start", "_last", "_extra", "_link")

    def __init__(self, *, min_phase_s: float = MIN_PHASE_S, h: float = CUSUM_H,
                 k: float = CUSUM_K):
        self.min_phase_s, self.h, self.k = min_phase_s, h, k
        self._last = None  # timestamp of the previous sample
        self._extra: tuple = ()  # the extras the PCIe link rate was read from
        self._link = link_of(())[0]
        self._reset(None)
        self._ema: list[float | None] = [None] * N_FEATURES

    def _reset(self, start: float | None) -> None:
        self._sum = [0.0] * N_FEATURES
        self._n = [0] * N_FEATURES
        self._pos = [0.0] * N_FEATURES
        self._neg = [0.0] * N_FEATURES
        self._pos_t: list[float | None] = [None] * N_FEATURES
        self._neg_t: list[float | None] = [None] * N_FEATURES
        self._start = start

    @property
    def phase_start(self) -> float | None:
        """When the current phase began (None before the first sample)."""
        return self._start

    def push(self, d: DeviceSnapshot) -> float | None:
        return self.push_values(d.timestamp, read_row(d), d.power_limit_w, d.mem_total_bytes,
                                d.extra)

    def push_values(self, ts: float, row: tuple, power_limit_w: float | None,
                    mem_total: int | None, extra: tuple | None = None,
                    host_busy: float | None = None) -> float | None:
        """``push`` from plain values: the sample's timestamp, ``read_row``, power limit and memory
        size (and its extras, where the PCIe link rate may change; ``host_busy_of`` its host)."""
        if extra is not None and extra is not self._extra and extra != self._extra:
            self.link_for(extra)  # the link can retrain
        last, self._last = self._last, ts
        x = features_of(row, power_limit_w, mem_total, self._link, host_busy)
        dt = (ts - last) if last is not None and ts > last else SMOOTH_S
        # at least 3 samples' worth of smoothing whatever the sampling rate (a starved loader
        # sampled at 1 Hz alternates busy and idle samples)
        span = SMOOTH_SAMPLES * dt
        if not span > SMOOTH_S:  # max(SMOOTH_S, span)
            span = SMOOTH_S
        return self.step(ts, x, dt / (span + dt))

    def link_for(self, extra: tuple) -> float:
        """The PCIe link rate ``features_of`` divides by, after a sample with these extras."""
        if extra is not self._extra and extra != self._extra:
            self._extra, self._link = extra, link_of(extra)[0]
        return self._link

    def pending_since(self) -> float | None:
        """When the evidence of a change not yet confirmed began (the earliest feature whose
        CUSUM is off zero), or None when every feature sits at its phase's level."""
        first = None
        for t in self._pos_t:
            if t is not None and (first is None or t < first):
                first = t
        for t in self._neg_t:
            if t is not None and (first is None or t < first):
                first = t
        return first

    def last_sample(self) -> float | None:
        """The previous sample's timestamp: the next one's smoothing interval is from it."""
        return self._last

    def skip_to(self, ts: float) -> None:
        """Record the newest sample's timestamp when the caller computed the features and
        smoothing of a run of samples itself and fed them to ``step``."""
        self._last = ts

    def step(self, ts: float, x: list[float | None], alpha: float) -> float | None:
        """``push_values`` once the sample's ``features_of`` and smoothing factor are known: the
        change point this sample confirms, or None (``steps`` of one sample)."""
        found = self.steps((ts,), (x,), (alpha,))
        return found[0][1] if found else None

    def steps(self, ts: Sequence[float], xs: Sequence[Sequence[float | None]],
              alphas: Sequence[float], first: int = 0) -> list[tuple[int, float]]:
        """Each sample in turn (its timestamp, ``features_of`` and smoothing factor; a missing
        feature is None and skipped): (``first`` + index, change point) of the samples that
        confirm a change. ``analysis.blocks`` passes a whole run of samples at once, computing
        their features and factors itself (without the host feature: its rows are one shorter);
        one call per run instead of per sample is a sixth of ``analyze``'s time."""
        out = []
        k, h, min_phase = self.k, self.h, self.min_phase_s
        for j, (t, x, alpha) in enumerate(zip(ts, xs, alphas), first):
            if self._start is None:
                self._start = t
            ema, sums, ns = self._ema, self._sum, self._n
            pos, neg, pos_t, neg_t = self._pos, self._neg, self._pos_t, self._neg_t
            start = self._start
            armed = t - start >= min_phase
            change = None
            for i, v in enumerate(x):  # smooth, test, add to the phase mean
                if v is None:
                    continue
                e = ema[i]
                e = v if e is None else e + alpha * (v - e)
                ema[i] = e
                n = ns[i]
                total = sums[i]
                sums[i] = total + e
                ns[i] = n + 1
                if n:
                    dev = e - total / n  # against the phase mean before this sample
                    p0 = pos[i]
                    n0 = neg[i]
                    if -k <= dev <= k and not p0 and not n0:
                        continue  # steady: both sums stay at zero (the common case)
                    q = p0 + dev - k
                    if q <= 0.0:
                        q, pos_t[i] = 0.0, None
                    elif pos_t[i] is None:
                        pos_t[i] = t
                    pos[i] = q
                    if armed and q > h and change is None:
                        change = pos_t[i]
                    q = n0 - dev - k
                    if q <= 0.0:
                        q, neg_t[i] = 0.0, None
                    elif neg_t[i] is None:
                        neg_t[i] = t
                    neg[i] = q
                    if armed and q > h and change is None:
                        change = neg_t[i]
            if change is None:
                continue
            # the new phase starts where the evidence began, but never less than a minimum
            # phase after the previous start
            change = max(change, start + min_phase)
            if change > t:
                change = t
            self._reset(change)
            sums, ns = self._sum, self._n
            for i, v in enumerate(x):  # the new phase's reference starts from this level
                if v is not None:
                    ema[i] = v
                    sums[i], ns[i] = v, 1
            out.append((j, change))
        return out


def segment(samples: Sequence[DeviceSnapshot], **kw) -> list[tuple[float, float]]:
    """(start, end) of each phase of one device's samples (oldest first); end is the next phase's
    start, or the last sample's timestamp."""
    if not samples:
        return []
    det = PhaseDetector(**kw)
    starts = [samples[0].timestamp]
    for d in samples:
        c = det.push(d)
        if c is not None:
            starts.append(c)
    ends = starts[1:] + [samples[-1].timestamp]
    return list(zip(starts, ends))
