"""The trace: workloads with their submission schedule, and node failures, in one frozen object.

The documented file format (``schemas/trace.schema.json``) has one record per task with the
fields of :class:`Task`; it is read from CSV (``.csv`` / ``.csv.gz``, one task per row, header
row naming the fields), JSON Lines (``.jsonl``: records with ``"type": "task"`` (default) or
``"node_failure"``) or a YAML/JSON document ``{tasks: [...], node_failures: [...]}``.
Validation collects every problem (file, row, field) and raises one
:class:`~engine.errors.UserError`; records are checked by hand rather than by jsonschema
because traces have 10^5 rows (a test keeps the two in agreement).

Times are seconds from the start of the trace. ``min_runtime`` / ``resumable`` may be absent
(``None``): :func:`engine.sim.prepare.prepare_trace` then assigns a contract by rules.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Sequence


from engine.errors import MORE, Problem, UserError
from engine.loader import yamlread

CLASSES = ("debug", "small", "large")
TASK_FIELDS = ("id", "submit", "pods", "gpus_per_pod", "runtime", "owner", "leaf", "min_runtime",
               "resumable", "priority", "class", "cluster")
_TRUE = {"true", "1", "yes", "y", "t"}
_FALSE = {"false", "0", "no", "n", "f"}


@dataclass(frozen=True)
class Task:
    """One workload of a trace. ``runtime`` is the work it needs (seconds of uninterrupted run);
    ``leaf`` is the budget charged (``None``: unmapped, or unfunded when prepared);
    ``min_runtime`` 0 means unfunded (free) work. ``line``: the line of the trace file the
    task was read from (0: not read from a file), so a problem found later names it."""

    id: str
    submit: float
    pods: int
    gpus_per_pod: int
    runtime: float
    owner: str
    leaf: str | None = None
    min_runtime: float | None = None
    resumable: bool | None = None
    priority: int = 0
    klass: str | None = None
    cluster: str | None = None
    line: int = field(default=0, compare=False, repr=False)

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod

    @property
    def funded(self) -> bool:
        return bool(self.leaf) and (self.min_runtime or 0.0) > 0.0

    def to_record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "submit": self.submit, "pods": self.pods,
                               "gpus_per_pod": self.gpus_per_pod, "runtime": self.runtime,
                               "owner": self.owner}
        for key, value in (("leaf", self.leaf), ("min_runtime", self.min_runtime),
                           ("resumable", self.resumable), ("class", self.klass),
                           ("cluster", self.cluster)):
            if value is not None:
                out[key] = value
        if self.priority:
            out["priority"] = self.priority
        return out


def replace_task(task: Task, **changes: Any) -> Task:
    """``dataclasses.replace(task, **changes)`` at a fraction of the cost: preparing a trace
    of 10^5 tasks replaces each several times, and ``replace`` inspects the fields and runs
    the frozen ``__init__`` every time. :class:`Task` is a plain frozen dataclass (no
    ``__post_init__``, nothing derived), so a copy of its field values with ``changes``
    applied is the same task."""
    unknown = changes.keys() - _TASK_ATTRS
    if unknown:
        raise TypeError(f"Task has no field {sorted(unknown)[0]!r}")
    new = object.__new__(Task)
    new.__dict__.update(task.__dict__)
    new.__dict__.update(changes)
    return new


_TASK_ATTRS = frozenset(Task.__dataclass_fields__)


@dataclass(frozen=True)
class NodeFailure:
    """Node ``node`` turns unhealthy at ``time``; once drained (empty) it is repaired in
    ``repair_s`` seconds and becomes schedulable again (``line``: as a :class:`Task`'s)."""

    time: float
    node: str
    repair_s: float
    line: int = field(default=0, compare=False, repr=False)


@dataclass(frozen=True)
class Trace:
    tasks: tuple[Task, ...]
    failures: tuple[NodeFailure, ...] = ()
    name: str = ""
    meta: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), compare=False)

    @staticmethod
    def of(tasks: Iterable[Task], failures: Iterable[NodeFailure] = (), name: str = "",
           meta: Mapping[str, Any] | None = None) -> "Trace":
        """A trace with tasks sorted by (submit, id) and failures by (time, node)."""
        return Trace(tuple(sorted(tasks, key=lambda t: (t.submit, t.id))),
                     tuple(sorted(failures, key=lambda f: (f.time, f.node))), name,
                     MappingProxyType(dict(meta or {})))

    @property
    def span(self) -> float:
        """Seconds from 0 to the last submission (0 for an empty trace)."""
        return self.tasks[-1].submit if self.tasks else 0.0

    def owners(self) -> tuple[str, ...]:
        return tuple(sorted({t.owner for t in self.tasks}))

    def window(self, start: float, end: float | None) -> "Trace":
        """Tasks submitted in [start, end) and failures in the same window, shifted to start at 0."""
        stop = float("inf") if end is None else end
        tasks = [replace_task(t, submit=t.submit - start) for t in self.tasks
                 if start <= t.submit < stop]
        fails = [replace(f, time=f.time - start) for f in self.failures if start <= f.time < stop]
        meta = dict(self.meta, window=[start, end])
        for key in ("horizon", "measure_from", "warmup"):
            meta.pop(key, None)
        if end is not None:
            meta["horizon"] = end - start
        return Trace.of(tasks, fails, self.name, meta)

    def with_meta(self, **extra: Any) -> "Trace":
        return Trace(self.tasks, self.failures, self.name, MappingProxyType({**self.meta, **extra}))


# ---------------------------------------------------------------------------- parsing


def _num(value: Any, name: str, problems: list[str], integer: bool = False,
         minimum: float = 0.0) -> Any:
    try:
        if isinstance(value, bool):
            raise ValueError
        number = float(value)
    except (TypeError, ValueError):
        problems.append(f"{name} must be a number, got {value!r}")
        return None
    if number != number or number in (float("inf"), float("-inf")):
        problems.append(f"{name} must be finite, got {value!r}")
        return None
    if number < minimum:
        problems.append(f"{name} must be >= {minimum:g}, got {value!r}")
        return None
    if integer:
        if number != int(number):
            problems.append(f"{name} must be a whole number, got {value!r}")
            return None
        return int(number)
    return number


def _or_one(value: Any) -> Any:
    return 1 if value is None or value == "" else value


def _bool(value: Any, problems: list[str]) -> bool | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    problems.append(f"resumable must be true or false, got {value!r}")
    return None


def _opt(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def task_from_record(rec: Mapping[str, Any], line: int = 0) -> tuple[Task | None, list[str]]:
    """Parse one record (dict of field -> value, strings allowed; read from ``line`` of its
    file) into a Task, or the reasons not."""
    problems: list[str] = []
    unknown = sorted(set(rec) - set(TASK_FIELDS) - {"type"})
    if unknown:
        problems.append(f"unknown field(s) {', '.join(unknown)}; known: {', '.join(TASK_FIELDS)}")
    for req in ("id", "submit", "runtime", "owner"):
        if rec.get(req) in (None, ""):
            problems.append(f"missing required field {req!r}")
    for name in ("id", "owner", "leaf", "cluster", "class"):
        if isinstance(rec.get(name), (list, dict, bool)):
            problems.append(f"{name} must be text, got {type(rec[name]).__name__} {rec[name]!r}")
    # (the fields present are read on, so a row's every problem shows at once)
    given = lambda name: rec.get(name) not in (None, "")  # noqa: E731
    submit = _num(rec["submit"], "submit", problems) if given("submit") else None
    runtime = _num(rec["runtime"], "runtime", problems) if given("runtime") else None
    # (absent or blank: 1; a 0 is refused like any count below 1, as the schema says)
    pods = _num(_or_one(rec.get("pods")), "pods", problems, integer=True, minimum=1)
    gpp = _num(_or_one(rec.get("gpus_per_pod")), "gpus_per_pod", problems, integer=True, minimum=1)
    raw_min = rec.get("min_runtime")
    min_rt = None if raw_min in (None, "") else _num(raw_min, "min_runtime", problems)
    prio = _num(rec.get("priority") or 0, "priority", problems, integer=True, minimum=-10**9)
    resumable = _bool(rec.get("resumable"), problems)
    klass = None if isinstance(rec.get("class"), (list, dict, bool)) else _opt(rec.get("class"))
    if klass is not None and klass not in CLASSES:
        problems.append(f"class must be one of {', '.join(CLASSES)}, got {klass!r}")
    if problems or submit is None or runtime is None:  # (a missing one is among the problems)
        return None, problems
    return Task(id=str(rec["id"]).strip(), submit=submit, pods=pods, gpus_per_pod=gpp,
                runtime=runtime, owner=str(rec["owner"]).strip(), leaf=_opt(rec.get("leaf")),
                min_runtime=min_rt, resumable=resumable, priority=prio, klass=klass,
                cluster=_opt(rec.get("cluster")), line=line), []


FAILURE_FIELDS = ("time", "node", "repair_s")


def failure_from_record(rec: Mapping[str, Any], line: int = 0) -> tuple[NodeFailure | None, list[str]]:
    problems: list[str] = []
    unknown = sorted(set(rec) - set(FAILURE_FIELDS) - {"type"})
    if unknown:
        problems.append(f"unknown field(s) of a node failure {', '.join(unknown)}; known: "
                        f"{', '.join(FAILURE_FIELDS)}")
    for req in FAILURE_FIELDS:
        if rec.get(req) in (None, ""):
            problems.append(f"missing required field {req!r}")
    if problems:
        return None, problems
    time = _num(rec["time"], "time", problems)
    repair = _num(rec["repair_s"], "repair_s", problems)
    if problems:
        return None, problems
    return NodeFailure(time, str(rec["node"]), repair, line), []


def _open_text(path: Path) -> io.TextIOBase:
    # (utf-8-sig: UTF-8, without the byte-order mark some spreadsheet tools write first)
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8-sig", newline="")
    return open(path, encoding="utf-8-sig", newline="")


def read_trace_file(path: str | Path, name: str | None = None) -> Trace:
    """Read a trace in the documented format; raise UserError with every problem found."""
    path = Path(path)
    shown = str(path)
    if not path.exists():
        raise UserError([Problem(shown, 0, 0, "trace file not found",
                                 "give a path, or one of the bundled traces: philly, helios")])
    suffixes = [s for s in path.suffixes if s != ".gz"]
    kind = suffixes[-1] if suffixes else ""
    tasks: list[Task] = []
    fails: list[NodeFailure] = []
    problems: list[Problem] = []
    seen: set[str] = set()

    def take(rec: Mapping[str, Any], line: int) -> None:
        if not isinstance(rec, Mapping):
            problems.append(Problem(shown, line, 0, "record must be a mapping of field: value"))
            return
        kind = rec.get("type", "task")
        if kind not in ("task", "node_failure"):
            problems.append(Problem(shown, line, 0, f"type must be task or node_failure, got {kind!r}",
                                    "see schemas/trace.schema.json"))
            return
        if kind == "node_failure":
            failure, why = failure_from_record({k: v for k, v in rec.items() if k != "type"}, line)
            if failure:
                fails.append(failure)
        else:
            task, why = task_from_record(rec, line)
            if task:
                if task.id in seen:
                    why = [f"duplicate task id {task.id!r}"]
                seen.add(task.id)
                if not why:
                    tasks.append(task)
        for msg in why:
            problems.append(Problem(shown, line, 0, msg, "see schemas/trace.schema.json"))

    if kind == ".csv":
        with _open_text(path) as fh:
            reader = csv.DictReader(fh)
            _check_header(shown, reader.fieldnames or [])
            for row in reader:
                take({k: v for k, v in row.items() if k is not None and v not in (None, "")},
                     reader.line_num)
    elif kind == ".jsonl":
        with _open_text(path) as fh:
            for lineno, line in enumerate(fh, 1):
                if line.strip():
                    try:
                        take(json.loads(line), lineno)
                    except json.JSONDecodeError as err:
                        problems.append(Problem(shown, lineno, err.colno, f"invalid JSON: {err.msg}"))
    elif kind in (".yaml", ".yml", ".json"):
        # the configuration's strict reader: duplicate keys refused, every value's line known
        with (gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")) as fb:
            raw = fb.read()
        parsed, refused = yamlread.parse(shown, raw)
        if parsed is None:
            raise UserError([replace(p, hint="a large trace reads faster as .jsonl or .csv")
                             if p.code == "too-large" else p for p in refused])
        problems.extend(refused)  # (duplicate keys: the rest is read too, every problem at once)
        doc = parsed.data
        if not isinstance(doc, Mapping) or not isinstance(doc.get("tasks"), list):
            raise UserError([Problem(shown, 1, 1, "a trace document needs a 'tasks' list",
                                     "see schemas/trace.schema.json")])
        for key in sorted(set(doc) - {"tasks", "node_failures"}):
            problems.append(parsed.problem((key,), f"unknown field {key!r} of a trace document",
                                           "it holds tasks: and node_failures:", key=True))
        failures = doc.get("node_failures") or []
        if not isinstance(failures, list):
            problems.append(parsed.problem(("node_failures",), "node_failures must be a list",
                                           "see schemas/trace.schema.json"))
            failures = []
        for i, rec in enumerate(doc["tasks"]):
            take(rec, parsed.loc(("tasks", i))[0])
        for i, rec in enumerate(failures):
            take({**rec, "type": rec.get("type", "node_failure")} if isinstance(rec, Mapping) else rec,
                 parsed.loc(("node_failures", i))[0])
            if isinstance(rec, Mapping) and rec.get("type", "node_failure") != "node_failure":
                problems.pop()  # (the type problem, said for a list of failures)
                problems.append(parsed.problem(("node_failures", i, "type"),
                                               "a record under node_failures is a node failure",
                                               "drop its type, or move it under tasks"))
    else:
        raise UserError([Problem(shown, 0, 0, f"unknown trace file type {kind or '(none)'!r}",
                                 "use .csv, .csv.gz, .jsonl, .yaml or .json, or --trace-format")])
    if problems:
        raise UserError(first_problems(problems, shown))
    return Trace.of(tasks, fails, name or path.name.split(".")[0], {"source": shown})


def _check_header(shown: str, header: Sequence[str]) -> None:
    """A CSV whose header is not the documented format's is one problem, not one per row
    (every row of a large file of another layout would repeat it)."""
    missing = [f for f in ("id", "submit", "runtime", "owner") if f not in header]
    unknown = [c for c in header if c not in TASK_FIELDS and c != "type"]
    if missing or unknown:
        what = "; ".join(x for x in (
            f"lacks {', '.join(missing)}" if missing else "",
            f"has columns the format does not know: {', '.join(unknown)}" if unknown else "") if x)
        raise UserError([Problem(shown, 1, 0, f"the header {what}",
                                 "for the documented format see schemas/trace.schema.json; a CSV of "
                                 "another layout reads with --trace-format generic --columns "
                                 "submit=COL,runtime=COL,gpus=COL,owner=COL")])


def first_problems(problems: list[Problem], shown: str, limit: int = 200) -> list[Problem]:
    """The first ``limit`` problems, and a last one saying how many more there are."""
    if len(problems) <= limit:
        return problems
    return problems[:limit] + [Problem(shown, 0, 0, f"... and {len(problems) - limit} more problems",
                                       f"the first {limit} are shown; fix those and read it again",
                                       code=MORE)]


def save_trace(trace: Trace, path: str | Path) -> Path:
    """Write ``trace`` as ``.csv`` (tasks only) or ``.jsonl`` (tasks and node failures)."""
    path = Path(path)
    if path.suffix == ".csv":
        if trace.failures:
            raise ValueError("CSV traces cannot carry node failures; write .jsonl")
        with open(path, "w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=TASK_FIELDS, lineterminator="\n")
            writer.writeheader()
            for task in trace.tasks:
                writer.writerow(task.to_record())
    else:
        with open(path, "w", encoding="utf-8") as fh:
            for task in trace.tasks:
                fh.write(json.dumps(task.to_record(), sort_keys=True) + "\n")
            for f in trace.failures:
                fh.write(json.dumps({"type": "node_failure", "time": f.time, "node": f.node,
                                     "repair_s": f.repair_s}, sort_keys=True) + "\n")
    return path
