"""A fake ``pyhlml`` (habana-pyhlml 1.24 names) serving the Gaudi 3 values of
``tests/fixtures/hpu/gaudi3_8x.csv`` and injecting HLML errors per (function, device).

Return types follow pyhlml 1.24.2.481: utilization is a struct with ``.aip``, memory a struct with
``free/total/used`` bytes, names and UUIDs bytes, power in mW; errors are ``HLMLError`` with ``.value``
(NOT_SUPPORTED = 3, AIP_IS_LOST = 15, UNINITIALIZED = 1 when libhlml.so cannot be loaded).
"""

from __future__ import annotations

import types
from collections import Counter
from pathlib import Path

CSV = Path(__file__).resolve().parents[1] / "fixtures" / "hpu" / "gaudi3_8x.csv"
MIB = 1024 * 1024


class HLMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"HLML Error with code {value}")
        self.value = value


def _rows() -> list[dict]:
    out = []
    for line in CSV.read_text().splitlines():
        c = [x.strip() for x in line.split(",")]
        out.append({
            "index": int(c[0]), "uuid": c[1], "name": c[2],
            "total": int(c[4].split()[0]) * MIB, "used": int(c[5].split()[0]) * MIB,
            "free": int(c[6].split()[0]) * MIB, "power_mw": int(c[7].split()[0]) * 1000,
            "limit_mw": int(c[8].split()[0]) * 1000, "temp": int(c[9].split()[0]),
            "util": int(c[10].split()[0]),
        })
    return out


class FakeHlml:
    def __init__(self, *, init_error: int | None = None) -> None:
        self.rows = _rows()
        self.init_error = init_error
        self.calls: Counter[tuple[str, int | None]] = Counter()
        self.failures: dict[tuple[str, int | None], int] = {}
        self.throttle = {1: 1 << 0}  # device 1 is power-throttled
        self.module = types.ModuleType("pyhlml")
        self.module.HLMLError = HLMLError
        for name in dir(self):
            if name.startswith("hlml"):
                setattr(self.module, name, self._wrap(name, getattr(self, name)))

    def fail(self, fn: str, code: int, device: int | None = None) -> None:
        self.failures[(fn, device)] = code

    def _wrap(self, name, impl):
        def call(*args):
            per_device = name.startswith("hlmlDevice") and name != "hlmlDeviceGetHandleByIndex"
            idx = args[0] if args and isinstance(args[0], int) and per_device else None
            self.calls[(name, idx)] += 1
            code = self.failures.get((name, idx)) or self.failures.get((name, None))
            if code:
                raise HLMLError(code)
            return impl(*args)
        return call

    def hlmlInit(self):
        if self.init_error is not None:
            raise HLMLError(self.init_error)

    def hlmlShutdown(self):
        pass

    def hlmlDeviceGetCount(self):
        return len(self.rows)

    def hlmlDeviceGetHandleByIndex(self, i):
        return i  # handles are plain ints in this fake

    def hlmlDeviceGetName(self, h):
        return self.rows[h]["name"].encode()

    def hlmlDeviceGetUUID(self, h):
        return self.rows[h]["uuid"].encode()

    def hlmlDeviceGetTemperatureThreshold(self, h, kind):
        return 95 if kind == 1 else 105

    def hlmlDeviceGetMaxClockInfo(self, h, clock):
        return 1600

    def hlmlDeviceGetClockInfo(self, h, clock):
        return 1600 if self.rows[h]["util"] else 1000

    def hlmlDeviceGetUtilizationRates(self, h):
        return types.SimpleNamespace(aip=self.rows[h]["util"], memory=0)

    def hlmlDeviceGetMemoryInfo(self, h):
        r = self.rows[h]
        return types.SimpleNamespace(free=r["free"], total=r["total"], used=r["used"])

    def hlmlDeviceGetTemperature(self, h, sensor):
        return self.rows[h]["temp"]

    def hlmlDeviceGetPowerUsage(self, h):
        return self.rows[h]["power_mw"]

    def hlmlDeviceGetPowerManagementLimit(self, h):
        return self.rows[h]["limit_mw"]

    def hlmlDeviceGetCurrentClocksThrottleReasons(self, h):
        return self.throttle.get(h, 0)

    def hlmlDeviceGetTotalECCErrors(self, h, error_type, counter):
        return 2 if (h, error_type) == (3, 0) else 0
