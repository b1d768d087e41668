"""``fleet-tui analyze TRACE``: the handler and its output (phases or windows, table or JSON),
kept apart from ``monitor`` so each stays short. Engine imports happen inside the handler."""

from __future__ import annotations

import argparse
import json
import sys
from json.encoder import encode_basestring_ascii
from math import isfinite

from fleet_tui.commands._output import kind_words

# windows the analysis can step (core.limits): below 1 ms no sampler has two samples; above ~116
# days a window is the whole trace; a sample in MAX_OVERLAP windows multiplies the output by that
MIN_WINDOW_S = 1e-3


def run_analyze(args: argparse.Namespace) -> int:
    """``fleet-tui analyze``: phases (or fixed windows) of a trace, streamed."""
    from fleet_tui.commands._output import print_table
    from fleet_tui.core.errors import UserError
    from fleet_tui.core.limits import int_limit, limit
    from fleet_tui.core.monitor.analysis import analyze_trace
    from fleet_tui.core.monitor.analysis.readings import RawReadings
    from fleet_tui.core.monitor.analysis.stream import analyze_readings, analyze_stream
    from fleet_tui.core.monitor.trace import SORT_MAX_BYTES, TraceOrderError, TraceReader, load_sorted

    max_window_s, max_overlap = limit("window_s"), int_limit("window_overlap")
    for flag, value in (("--window", args.window), ("--step", args.step)):
        if value is not None and not MIN_WINDOW_S <= value <= max_window_s:
            raise UserError(f"{flag} {value:g}: must be {MIN_WINDOW_S:g}-{max_window_s:g} seconds")
    if args.step is not None and args.window is None:
        raise UserError("--step needs --window (phases have no step)")
    overlapping = args.step is not None and args.step < args.window
    if overlapping and args.window / args.step > max_overlap:
        raise UserError(f"--window {args.window:g} --step {args.step:g}: a sample would be in "
                        f"{args.window / args.step:.0f} windows; at most {max_overlap} (raise --step)")

    def results(snapshots):
        if overlapping:  # overlapping windows hold the trace (analyze_trace)
            return iter(analyze_trace(snapshots, window_s=args.window, step_s=args.step))
        return analyze_stream(snapshots, window_s=args.window)

    # the file read straight into readings (no snapshot per sample: bench_analysis --lines);
    # overlapping windows and a file sorted in memory take snapshots
    reader = TraceReader(args.trace) if overlapping else RawReadings(args.trace)
    if overlapping and reader.path.stat().st_size > SORT_MAX_BYTES:
        raise UserError(f"{args.trace}: overlapping windows (--step below --window) hold the "
                        f"trace in memory, so they take files up to {SORT_MAX_BYTES // 2**20} MB; "
                        "leave out --step (back-to-back windows stream any length)")

    def first_pass():
        if isinstance(reader, TraceReader):  # overlapping windows
            return results(reader)
        if args.window is None:
            try:  # phases over runs of samples as columns (numpy: bench_analysis --lines)
                from fleet_tui.core.monitor.analysis.blocks import analyze_items
                from fleet_tui.core.monitor.analysis.runs import read_items
            except ImportError:
                pass
            else:
                return analyze_items(read_items(reader), reader.snapshot_of)
        return analyze_readings(reader, window_s=args.window, snapshot_of=reader.snapshot_of)

    # a file small enough to sort is printed at the end (it may have to be read again, sorted);
    # a longer one streams its JSON as each phase ends, so memory stays bounded
    out = _AnalyzeOutput(args.json, stream=reader.path.stat().st_size > SORT_MAX_BYTES)
    try:
        for w in first_pass():
            out.add(w)
    except TraceOrderError:
        out = _AnalyzeOutput(args.json)  # nothing printed yet: JSON and the table print at the end
        fixed = load_sorted(args.trace)
        print(f"fleet-tui: {args.trace}: {fixed.moved} sample(s) out of time order: sorted"
              + (f"; {fixed.repeats} repeated timestamp(s) skipped" if fixed.repeats else ""),
              file=sys.stderr)
        for w in results(fixed.snapshots):
            out.add(w)
    else:
        if reader.repeats:
            print(f"fleet-tui: {args.trace}: {reader.repeats} sample(s) with a repeated "
                  f"timestamp skipped", file=sys.stderr)
    if out.count == 0:
        raise UserError(f"{args.trace}: no samples to analyze")
    if args.json:
        out.finish_json()
        return 0
    print_table(["start", "end", "gpu", "phase", "primary", "conf", "risks", "also"], out.table())
    print()
    print("\n".join(out.shares.lines(kind_words)))
    return 0


class _AnalyzeOutput:
    """Rows of the analyze table, or the JSON list, kept as short text (the analyses are not
    held: a long trace stays in bounded memory). Printed by start, then GPU; JSON streamed from
    a long file comes in the order phases end."""

    def __init__(self, as_json: bool, stream: bool = False):
        self.as_json = as_json
        self.stream = stream and as_json
        self.rows: list[tuple[tuple, list[str]]] = []
        self.items: list[tuple[tuple, str]] = []
        self.count = 0
        from fleet_tui.core.monitor.analysis.summary import TimeShares

        self.shares = TimeShares()

    def add(self, w) -> None:
        self.count += 1
        self.shares.add(w)
        if self.as_json:
            text = "  " + analysis_json(w, "  ")
            if self.stream:
                sys.stdout.write(("[\n" if self.count == 1 else ",\n") + text)
            else:
                self.items.append(((w.start, w.device_index, w.device_key), text))
            return
        d = w.primary_diagnosis
        risks = w.risks
        others = ", ".join(kind_words(x.kind) for x in w.diagnoses[1:] if x.kind not in risks)
        self.rows.append(((w.start, w.device_index, w.device_key),
                          [f"{w.start:.1f}", f"{w.end:.1f}", str(w.device_index), w.phase or "",
                           kind_words(w.primary), f"{d.confidence:.2f}" if d else "",
                           ", ".join(map(kind_words, risks)), others]))

    def table(self) -> list[list[str]]:
        return [row for _, row in sorted(self.rows, key=lambda r: r[0])]

    def finish_json(self) -> None:
        """The same bytes as ``print_json`` of the list."""
        if self.stream:
            sys.stdout.write("\n]\n" if self.count else "[]\n")
            return
        items = [text for _, text in sorted(self.items, key=lambda r: r[0])]
        sys.stdout.write("[\n" + ",\n".join(items) + "\n]\n" if items else "[]\n")


def analysis_json(w, pad: str = "") -> str:
    """``indented_json(w.to_dict(), pad)`` of a ``DeviceAnalysis``, written straight from its
    fields: the keys of ``DeviceAnalysis.to_dict`` and ``Diagnosis.to_dict`` in their order (a
    test compares the two on every phase of the demo trace), no dict in between. A value
    ``_leaf`` does not write (NaN, another type) or a key not a string: ``indented_json`` of
    the dict itself, so the same text or the same error."""
    parts = _analysis_parts(w, pad)
    return indented_json(w.to_dict(), pad) if parts is None else "".join(parts)


def _analysis_parts(w, pad: str) -> list[str] | None:
    p1 = pad + "  "
    p2 = p1 + "  "
    p3 = p2 + "  "
    head = [_leaf(round(w.start, 3)), _leaf(round(w.end, 3)), _leaf(w.phase),
            _leaf(w.device_index), _leaf(w.device_key), _leaf(w.primary),
            _strings(w.risks, p2, p1), _leaf(w.samples), _strings(w.missing_signals, p2, p1)]
    if None in head:
        return None
    out = ["{"]
    for key, text in zip(_ANALYSIS_KEYS, head):
        out += ["\n" if key == '"start": ' else ",\n", p1, key, text]
    out += [",\n", p1, '"diagnoses": ']
    if not w.diagnoses:
        out.append("[]")
    else:
        lead = "[\n" + p2
        for d in w.diagnoses:
            vals = [_leaf(d.kind), _leaf(round(d.confidence, 3)), _evidence(d.evidence_dict, p3),
                    _strings(list(d.evidence_text), p3 + "  ", p3), _leaf(d.explanation),
                    _leaf(d.action), _leaf(d.severity), _leaf(d.role)]
            if None in vals:
                return None
            out += [lead, "{"]
            for key, text in zip(_DIAGNOSIS_KEYS, vals):
                out += ["\n" if key == '"kind": ' else ",\n", p3, key, text]
            out += ["\n", p2, "}"]
            lead = ",\n" + p2
        out += ["\n", p1, "]"]
    out += ["\n", pad, "}"]
    return out


_ANALYSIS_KEYS = ('"start": ', '"end": ', '"phase": ', '"device": ', '"device_key": ',
                  '"primary": ', '"risks": ', '"samples": ', '"missing_signals": ')
_DIAGNOSIS_KEYS = ('"kind": ', '"confidence": ', '"evidence": ', '"evidence_text": ',
                   '"explanation": ', '"action": ', '"severity": ', '"role": ')


def _evidence(ev: dict, pad: str) -> str | None:
    """A diagnosis' evidence dict as ``indented_json`` writes it at ``pad`` (``None``: a value
    ``_leaf`` does not write, or a key not a string)."""
    if not ev:
        return "{}"
    inner = pad + "  "
    out = []
    for k, v in ev.items():
        leaf = _leaf(v)
        if type(k) is not str or leaf is None:
            return None
        out.append(encode_basestring_ascii(k) + ": " + leaf)
    return "{\n" + inner + (",\n" + inner).join(out) + "\n" + pad + "}"


def _strings(items, inner: str, outer: str) -> str | None:
    """A list of strings as ``indented_json`` writes it (``None``: an item not a string)."""
    if not items:
        return "[]"
    if set(map(type, items)) != _STR:
        return None
    return ("[\n" + inner + (",\n" + inner).join(map(encode_basestring_ascii, items)) + "\n"
            + outer + "]")


def indented_json(obj, pad: str = "") -> str:
    """``json.dumps(obj, indent=2, allow_nan=False)`` with every line after the first indented by
    ``pad``: the same bytes, written by one recursive function instead of ``json``'s chain of
    generators (which ``indent`` forces: its C encoder has no indent before Python 3.13).
    bench_analysis --lines 10^5: 1.8 -> 0.6 us a line (one phase's JSON every ~27 lines).
    A value of another type (or a key not a string) is written by ``json`` itself."""
    out: list[str] = []
    _write(obj, pad, out)
    return "".join(out)


def _write(o, pad: str, out: list[str]) -> None:
    t = type(o)
    if t is dict and set(map(type, o)) <= _STR:  # (every key a str; no generator per key)
        if not o:
            out.append("{}")
            return
        inner = pad + "  "
        sep = "{\n" + inner
        for k, v in o.items():
            leaf = _leaf(v)  # (a scalar written here, not by a call: ~25 values a phase)
            if leaf is None:
                out.append(sep + encode_basestring_ascii(k) + ": ")
                _write(v, inner, out)
            else:
                out.append(sep + encode_basestring_ascii(k) + ": " + leaf)
            sep = ",\n" + inner
        out.append("\n" + pad + "}")
    elif t is list or t is tuple:
        if not o:
            out.append("[]")
            return
        inner = pad + "  "
        sep = "[\n" + inner
        for v in o:
            leaf = _leaf(v)
            if leaf is None:
                out.append(sep)
                _write(v, inner, out)
            else:
                out.append(sep + leaf)
            sep = ",\n" + inner
        out.append("\n" + pad + "]")
    else:
        leaf = _leaf(o)
        # NaN (json's error), subclasses, other keys: json's own text
        out.append(json.dumps(o, indent=2, allow_nan=False).replace("\n", "\n" + pad)
                   if leaf is None else leaf)


_STR = frozenset({str})


def _leaf(o) -> str | None:
    """The text of a string, number, bool or null as ``json.dumps`` writes it (``None`` for
    anything else, and for NaN/inf, which ``json`` rejects)."""
    t = type(o)
    if t is str:
        return encode_basestring_ascii(o)
    if t is float:
        return float.__repr__(o) if isfinite(o) else None
    if t is int:
        return int.__repr__(o)
    if o is None:
        return "null"
    if o is True:
        return "true"
    if o is False:
        return "false"
    return None
