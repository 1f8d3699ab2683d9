"""Importers: the two real traces we ship (Philly, Helios) and any CSV with a column mapping.

Each turns a foreign file into a :class:`~engine.sim.trace.Trace` in the documented format,
with owners as the source names them and no contract (``min_runtime``/``resumable`` unset; see
``engine.sim.prepare``). Gang shape: a job of ``g`` GPUs on ``gpus_per_node``-GPU nodes becomes
one pod when ``g <= gpus_per_node``, else ``pods = ceil(g / gpus_per_node)`` raised until it
divides ``g`` (12 GPUs -> 2 pods x 6), which is how the traced jobs were spread over nodes.

- Philly (``traces/philly/philly.csv.gz``, Pollux flattening): submit = ``timestamp`` minus the
  earliest timestamp, runtime = ``duration``, owner = the virtual cluster (VC) hash.
- Helios (``traces/helios/helios_data_training.csv.gz``, DIR-LAB excerpt): submit = running
  sum of ``interval``, runtime = ``run_time`` (at least 1 s), owner = ``u<user>``, pods =
  ``node_num`` when it divides ``gpu_num``; CPU-only rows (``gpu_num`` 0) are dropped.
- Generic CSV: ``columns`` maps trace fields to column names (``submit``, ``runtime``,
  ``owner`` and ``gpus`` or ``pods``/``gpus_per_pod`` required; ``id``, ``leaf``,
  ``min_runtime``, ``resumable``, ``priority``, ``class`` optional). ``submit`` may be numbers
  (seconds) or ISO timestamps; the earliest submission becomes time 0.
"""

from __future__ import annotations

import csv
import gzip
import zlib
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence

from engine.errors import Problem, UserError
from engine.resources import repo_root
from engine.sim.trace import (Task, Trace, _num, _open_text, first_problems, read_trace_file,
                              task_from_record)

TRACES_DIR = repo_root() / "traces"
BUNDLED = {
    "philly": ("philly", TRACES_DIR / "philly" / "philly.csv.gz"),
    "helios": ("helios", TRACES_DIR / "helios" / "helios_data_training.csv.gz"),
}


def gang_shape(gpus: int, gpus_per_node: int = 8) -> tuple[int, int]:
    """(pods, gpus_per_pod) for a job of ``gpus`` GPUs on ``gpus_per_node``-GPU nodes."""
    if gpus <= gpus_per_node:
        return 1, gpus
    # the fewest pods of equal size: the largest divisor of ``gpus`` that fits on a node
    # (a prime count gives pods of 1 GPU; at most ``gpus_per_node`` tries)
    per_pod = next(k for k in range(gpus_per_node, 0, -1) if gpus % k == 0)
    return gpus // per_pod, per_pod


def _ts(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return _utc(text)


def _utc(text: str) -> float:
    """Seconds since the epoch of an ISO timestamp; naive timestamps are read as UTC."""
    stamp = datetime.fromisoformat(text.strip())
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=timezone.utc)
    return stamp.timestamp()


PHILLY_COLUMNS = ("timestamp", "duration", "num_gpus", "cluster")
HELIOS_COLUMNS = ("u_id", "user", "gpu_num", "node_num", "interval", "run_time")


def _header(path: Path, fieldnames: Sequence[str] | None, needed: tuple[str, ...], what: str) -> None:
    """Refuse a file whose header lacks a column the importer reads (once, not per row)."""
    absent = [c for c in needed if c not in (fieldnames or [])]
    if absent:
        raise UserError([Problem(str(path), 1, 0, f"not a {what} trace: no column(s) {', '.join(absent)} "
                                 f"in the header", f"a {what} trace has the columns {', '.join(needed)}")])


def _amount(text: str | None, name: str, whole: bool = False) -> float:
    """A row's number, checked as the trace format checks its fields (``_num``: a finite
    number >= 0, whole for counts); ValueError in its words."""
    why: list[str] = []
    value = _num(text, name, why, integer=whole)
    if why:
        raise ValueError(why[0])
    return float(value)


def import_philly(path: str | Path, gpus_per_node: int = 8) -> Trace:
    path = Path(path)
    rows: list[tuple[float, float, int, str, int]] = []
    problems: list[Problem] = []
    with _open_text(path) as fh:
        reader = csv.DictReader(fh)
        _header(path, reader.fieldnames, PHILLY_COLUMNS, "Philly")
        for row in reader:
            if not any(row.values()):
                continue
            try:
                rows.append((_utc(row["timestamp"]), _amount(row["duration"], "duration"),
                             int(_amount(row["num_gpus"], "num_gpus", whole=True)),
                             (row["cluster"] or "").strip(), reader.line_num))
            except (TypeError, ValueError) as err:
                problems.append(Problem(str(path), reader.line_num, 0, f"bad Philly row: {err}",
                                        "expected timestamp (ISO),duration (s),num_gpus,gpu_time,cluster"))
    if problems:
        raise UserError(first_problems(problems, str(path)))
    if not rows:
        raise UserError([Problem(str(path), 0, 0, "the trace holds no jobs", "give a trace with rows")])
    t0 = min(r[0] for r in rows)
    tasks = []
    for ts, dur, gpus, vc, line in rows:
        if gpus <= 0:
            continue
        pods, gpp = gang_shape(gpus, gpus_per_node)
        tasks.append(Task(id=f"philly-{line:05d}", submit=ts - t0, pods=pods, gpus_per_pod=gpp,
                          runtime=max(1.0, dur), owner=vc, line=line))
    return Trace.of(tasks, name="philly", meta={"source": str(path), "format": "philly",
                                                "epoch": datetime.fromtimestamp(t0, timezone.utc).isoformat()})


def import_helios(path: str | Path, gpus_per_node: int = 8) -> Trace:
    path = Path(path)
    tasks = []
    now = 0.0
    problems: list[Problem] = []
    seen: dict[int, int] = {}  # u_id -> its line
    with _open_text(path) as fh:
        reader = csv.DictReader(fh)
        _header(path, reader.fieldnames, HELIOS_COLUMNS, "Helios")
        for row in reader:
            try:
                now += _amount(row["interval"], "interval")
                gpus = int(_amount(row["gpu_num"], "gpu_num", whole=True))
                nodes = max(1, int(_amount(row["node_num"], "node_num", whole=True)))
                runtime = _amount(row["run_time"], "run_time")
                uid = int(_amount(row["u_id"], "u_id", whole=True))
                user = (row["user"] or "").strip()
                if uid in seen:
                    raise ValueError(f"u_id {uid} again (first on line {seen[uid]})")
                seen[uid] = reader.line_num
            except (TypeError, ValueError) as err:
                problems.append(Problem(str(path), reader.line_num, 0, f"bad Helios row: {err}",
                                        "expected u_id,user,gpu_num,cpu_num,node_num,interval,"
                                        "run_time,..."))
                continue
            if gpus <= 0:
                continue
            if gpus % nodes == 0 and gpus // nodes <= gpus_per_node:
                pods, gpp = nodes, gpus // nodes
            else:
                pods, gpp = gang_shape(gpus, gpus_per_node)
            tasks.append(Task(id=f"helios-{uid:05d}", submit=now, pods=pods, gpus_per_pod=gpp,
                              runtime=max(1.0, runtime), owner=f"u{user}", line=reader.line_num))
    if problems:
        raise UserError(first_problems(problems, str(path)))
    return Trace.of(tasks, name="helios", meta={"source": str(path), "format": "helios"})


def import_generic_csv(path: str | Path, columns: Mapping[str, str],
                       gpus_per_node: int = 8) -> Trace:
    """Any CSV: ``columns`` maps trace fields (and ``gpus``) to column names."""
    path = Path(path)
    problems: list[Problem] = []
    missing = [f for f in ("submit", "runtime", "owner") if f not in columns]
    if "gpus" not in columns and "pods" not in columns:
        missing.append("gpus (or pods)")
    if missing:
        raise UserError([Problem(str(path), 0, 0, f"column mapping lacks {', '.join(missing)}",
                                 "e.g. --columns submit=ts,runtime=duration,gpus=num_gpus,owner=vc")])
    recs: list[tuple[dict[str, Any], int]] = []
    ids: dict[str, int] = {}  # task id -> the line it is first on
    with _open_text(path) as fh:
        reader = csv.DictReader(fh)
        absent = [c for c in columns.values() if c not in (reader.fieldnames or [])]
        if absent:
            raise UserError([Problem(str(path), 1, 0, f"no column(s) {', '.join(absent)} in header",
                                     f"the header has: {', '.join(reader.fieldnames or [])}")])
        for row in reader:
            if not any(row.values()):
                continue
            rec = {field: row[col] for field, col in columns.items()}
            line = reader.line_num
            mine: list[Problem] = []  # (every problem of the row, not the first)
            try:
                rec["submit"] = _ts(rec["submit"])
            except ValueError:
                mine.append(Problem(str(path), line, 0, f"submit must be seconds or an ISO timestamp, "
                                    f"got {rec['submit']!r}", f"column {columns['submit']!r}"))
                rec["submit"] = 0.0
            if "gpus" in rec:
                raw = rec.pop("gpus")
                gpus = _whole(raw)
                if gpus == 0:
                    continue  # a job without GPUs: not GPU work (as Philly's and Helios's)
                if gpus is None:
                    mine.append(Problem(str(path), line, 0, f"gpus must be a whole number >= 0, got {raw!r}",
                                        f"column {columns['gpus']!r}"))
                    gpus = 1
                pods, gpp = gang_shape(gpus, gpus_per_node)
                rec.setdefault("pods", pods)
                rec.setdefault("gpus_per_pod", gpp)
            rec.setdefault("id", f"{path.name.split('.')[0]}-{line:06d}")
            mine += [Problem(str(path), line, 0, msg) for msg in task_from_record(rec)[1]]
            first = ids.setdefault(str(rec["id"]), line)
            if first != line:
                mine.append(Problem(str(path), line, 0, f"duplicate task id {rec['id']!r} (first on line "
                                    f"{first})", f"column {columns.get('id', 'id')!r}: ids must be unique"))
            if mine:
                problems += mine
                continue
            recs.append((rec, line))
    t0 = min((r["submit"] for r, _ in recs), default=0.0)
    tasks = []
    for rec, line in recs:
        rec["submit"] -= t0
        task, why = task_from_record(rec, line)
        problems.extend(Problem(str(path), line, 0, msg) for msg in why)
        if task:
            tasks.append(task)
    if problems:
        raise UserError(first_problems(problems, str(path)))
    return Trace.of(tasks, name=path.name.split(".")[0], meta={"source": str(path), "format": "csv"})


def _whole(text: str) -> int | None:
    """``text`` as a whole number >= 0 (``8``, ``8.0``), else None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return int(value) if value >= 0 and value.is_integer() else None


def load_trace(path_or_name: str | Path, *, fmt: str | None = None,
               columns: Mapping[str, str] | None = None) -> Trace:
    """Load a bundled trace by name (``philly``, ``helios``) or a file.

    ``fmt``: ``philly``, ``helios``, ``generic`` (needs ``columns``) or ``None`` for the
    documented trace format (by file extension)."""
    key = str(path_or_name)
    if fmt is None and key in BUNDLED:
        fmt, path = BUNDLED[key]
    else:
        path = Path(key)
    if not Path(path).exists():
        raise UserError([Problem(str(path), 0, 0, "trace file not found",
                                 f"give a path, or a bundled trace: {', '.join(BUNDLED)}")])
    if fmt not in (None, "allot", "philly", "helios", "generic"):
        raise UserError([Problem(str(path), 0, 0, f"unknown trace format {fmt!r}",
                                 "use philly, helios, generic or allot")])
    try:
        if fmt == "philly":
            return import_philly(path)
        if fmt == "helios":
            return import_helios(path)
        if fmt == "generic" or columns:
            return import_generic_csv(path, columns or {})
        return read_trace_file(path)
    except UnicodeDecodeError as err:  # (the readers read text as UTF-8)
        raise UserError([Problem(str(path), 0, 0, f"the file is not UTF-8 text (byte "
                                 f"0x{err.object[err.start]:02x})", "save it as UTF-8")]) from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as err:  # (a name ending in .gz)
        raise UserError([Problem(str(path), 0, 0, f"not a whole gzip file ({err})",
                                 "give the file without .gz in its name if it is not compressed, "
                                 "or compress it again")]) from None
    except OSError as err:  # (a directory, no permission)
        raise UserError([Problem(str(path), 0, 0, f"cannot read the trace: {err.strerror or err}",
                                 "give the path of a trace file")]) from None
